class Autocomplete:
    def __init__(self, database, namespace: str) -> None:
        self.database = database
        self.namespace = namespace

    def flush(self) -> None:
        for key in self.database.keys(f"{self.namespace}:*"):
            self.database.unlink(key)
