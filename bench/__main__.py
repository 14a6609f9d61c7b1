"""python -m bench: see bench.run."""

from bench.run import entry

if __name__ == "__main__":
    entry()
