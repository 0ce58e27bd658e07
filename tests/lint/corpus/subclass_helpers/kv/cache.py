class Cache:
    def __init__(self, database, name: str = "cache") -> None:
        self.database = database
        self.name = name

    def get(self, key: str) -> bytes | None:
        return self.database.get(f"{self.name}:{key}")

    def flush(self) -> int:
        keys = self.database.keys(f"{self.name}:*")
        return self.database.delete(*keys) if keys else 0
