"""Importer placeholder: being written."""
