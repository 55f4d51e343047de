"""`ConfigError`, in a module of its own that imports nothing: the configuration is read and checked before the
gateway imports the SDK (`serve` starts its stdio servers as soon as it has it). `errors` re-exports it, in its
place in the tree of exceptions."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration problem, phrased for the person who wrote the file."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))

    def render(self) -> str:
        lines = [f"invalid configuration in {self.source}:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)
