from .autocomplete import Autocomplete
from .cache import Cache
from .database import Database

__all__ = ["Autocomplete", "Cache", "Database"]
