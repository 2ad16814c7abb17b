"""A cell's result: its typed model (result.json), the evidence a run leaves, the record assembled
from it, and the results folder that keeps them (the store)."""
