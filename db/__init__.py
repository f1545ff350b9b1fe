"""The store: settings, engine, embedded server, models, migrations."""

from db.engine import StoreInfo, StoreUnavailableError, build_engine, describe_store
from db.settings import Settings, get_settings

__all__ = ["Settings", "StoreInfo", "StoreUnavailableError", "build_engine", "describe_store", "get_settings"]
