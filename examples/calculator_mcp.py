"""A small MCP server for a council's members: arithmetic and unit conversion, both
read-only. It needs only the `mcp` package.

    python examples/calculator_mcp.py              # stdio (what council.toml's command runs)
    python examples/calculator_mcp.py --http 8765  # streamable HTTP on 127.0.0.1:8765/mcp

- `evaluate(expression)`: numbers, + - * / // % **, unary minus, parentheses, the functions
  sqrt, log (natural, or log(x, base)), exp, sin, cos, tan, round, abs, and the constants
  pi and e. The expression is parsed, never run as Python (no names, attributes or calls
  beyond these); its length and the size of a power are bounded.
- `convert(value, from_unit, to_unit)`: length (m, km, cm, mi, ft, in), mass (kg, g, lb,
  oz), time (s, min, h, day), temperature (C, F, K), volume (l, ml, gal: the US gallon).

A mistake (1/0, an unknown unit) is the tool's error, in one line, for the model to read.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import math
from collections.abc import Callable

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

MAX_EXPRESSION_CHARS = 500
MAX_DIGITS = 1_000  # the largest whole number a result or a step may have
MAX_DEPTH = 50  # parentheses and calls nested at most this deep

FUNCTIONS: dict[str, tuple[Callable[..., float], int, int]] = {
    # name: (function, fewest arguments, most arguments)
    "sqrt": (math.sqrt, 1, 1),
    "log": (math.log, 1, 2),
    "exp": (math.exp, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "round": (round, 1, 2),
    "abs": (abs, 1, 1),
}
CONSTANTS = {"pi": math.pi, "e": math.e}

OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}

# Each unit: its quantity and how many of the quantity's base unit one of it is.
UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "day": ("time", 86400.0),
    "l": ("volume", 1.0),
    "ml": ("volume", 0.001),
    "gal": ("volume", 3.785411784),
    # Temperatures are not a factor apart: see _to_kelvin.
    "c": ("temperature", 1.0),
    "f": ("temperature", 1.0),
    "k": ("temperature", 1.0),
}
SHOWN = {"c": "C", "f": "F", "k": "K"}


def evaluate_expression(expression: str) -> int | float:
    """The value of an arithmetic expression; ValueError (one line) when it is not one."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression.strip()!r}") from None
    try:
        return _checked(_value(tree.body, 0))
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("the result is too large") from None


def _value(node: ast.expr, depth: int) -> int | float:
    if depth > MAX_DEPTH:
        raise ValueError(f"the expression is nested more than {MAX_DEPTH} deep")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"{node.value!r} is not a number")
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in CONSTANTS:
            raise ValueError(f"unknown name {node.id!r} (constants: {', '.join(CONSTANTS)})")
        return CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _value(node.operand, depth + 1)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left = _value(node.left, depth + 1)
        right = _value(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            _power_allowed(left, right)
        return _checked(OPERATORS[type(node.op)](left, right))
    if isinstance(node, ast.Call):
        return _call(node, depth)
    raise ValueError(f"{ast.unparse(node)!r} is not allowed (only arithmetic)")


def _call(node: ast.Call, depth: int) -> int | float:
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        raise ValueError(
            f"unknown function {ast.unparse(node.func)!r} (functions: {', '.join(FUNCTIONS)})"
        )
    name = node.func.id
    function, fewest, most = FUNCTIONS[name]
    if node.keywords or not fewest <= len(node.args) <= most:
        count = str(fewest) if fewest == most else f"{fewest} or {most}"
        raise ValueError(f"{name} takes {count} argument{'s' if most > 1 else ''}")
    arguments = [_value(argument, depth + 1) for argument in node.args]
    if name == "round" and len(arguments) == 2 and not isinstance(arguments[1], int):
        raise ValueError("round's second argument is a whole number of digits")
    try:
        return function(*arguments)
    except ValueError:
        raise ValueError(f"{name} is not defined there (math domain error)") from None


def _power_allowed(base: float, exponent: float) -> None:
    """Refuse a power whose result would have more than MAX_DIGITS digits, before it is
    computed (a float power only overflows, which is caught as such)."""
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > 0:
        digits = exponent * math.log10(abs(base))
        if digits > MAX_DIGITS:
            raise ValueError(f"the power is too large (more than {MAX_DIGITS} digits)")


def _checked(value: int | float) -> int | float:
    if isinstance(value, complex):
        raise ValueError("the result is not a real number")
    if isinstance(value, int) and value.bit_length() > MAX_DIGITS * 3.33:
        raise ValueError(f"the result is too large (more than {MAX_DIGITS} digits)")
    return value


def shown(value: int | float) -> str:
    """A result as text: whole numbers exactly, others to 15 significant digits."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        raise ValueError("the result is not a finite number")
    return format(value, ".15g")


def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    """`value` in `from_unit` expressed in `to_unit`; ValueError (one line) when it cannot."""
    source, target = _unit(from_unit), _unit(to_unit)
    quantity, factor = UNITS[source]
    to_quantity, to_factor = UNITS[target]
    if quantity != to_quantity:
        raise ValueError(f"cannot convert {quantity} ({from_unit}) to {to_quantity} ({to_unit})")
    if quantity == "temperature":
        return _from_kelvin(_to_kelvin(value, source), target)
    return value * factor / to_factor


def _unit(name: str) -> str:
    key = name.strip().lower()
    if key not in UNITS:
        known = ", ".join(SHOWN.get(unit, unit) for unit in UNITS)
        raise ValueError(f"unknown unit {name!r} (known: {known})")
    return key


def _to_kelvin(value: float, unit: str) -> float:
    return {"c": value + 273.15, "f": (value - 32) * 5 / 9 + 273.15}.get(unit, value)


def _from_kelvin(value: float, unit: str) -> float:
    return {"c": value - 273.15, "f": (value - 273.15) * 9 / 5 + 32}.get(unit, value)


server = MCPServer("calculator", log_level="WARNING")
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


def read_only_tool(function: Callable[..., str]) -> Callable[..., str]:
    """A read-only tool of the server, described by its docstring without its indentation."""
    description = inspect.cleandoc(function.__doc__ or "")
    return server.tool(annotations=READ_ONLY, description=description)(function)


@read_only_tool
def evaluate(expression: str) -> str:
    """Evaluate an arithmetic expression, such as "2*(3+4)" or "sqrt(2)/3". Numbers,
    + - * / // % ** and parentheses; the functions sqrt, log (natural, or log(x, base)),
    exp, sin, cos, tan (radians), round, abs; the constants pi and e."""
    try:
        return shown(evaluate_expression(expression))
    except ValueError as error:
        raise ToolError(str(error)) from None


@read_only_tool
def convert(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a value between units of length (m, km, cm, mi, ft, in), mass (kg, g, lb,
    oz), time (s, min, h, day), temperature (C, F, K) or volume (l, ml, gal: US gallons)."""
    try:
        result = convert_units(value, from_unit, to_unit)
        return f"{shown(value)} {from_unit} = {shown(result)} {to_unit}"
    except ValueError as error:
        raise ToolError(str(error)) from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp"
    )
    arguments = parser.parse_args()
    if arguments.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=arguments.http)


if __name__ == "__main__":
    main()
