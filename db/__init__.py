"""The store: its settings, engine, embedded server, models, migrations."""

from db.engine import StoreInfo, StoreUnavailableError, build_engine, build_read_engine, describe_store
from db.settings import StoreSettings

__all__ = ["StoreInfo", "StoreSettings", "StoreUnavailableError", "build_engine", "build_read_engine", "describe_store"]
