"""Built-in environments, offline and CPU-only.  Importing this package registers them."""
