"""A request's fields as `mt serve` reads them: a JSON object, or a form with the query string (as LibreTranslate
reads `request.values`), every client mistake a one-line HttpError 400 (malformed or too deeply nested JSON,
non-finite numbers, lone surrogates, Starlette's form limits), and typed fields.
"""

from __future__ import annotations

import json
import math

from starlette.exceptions import HTTPException
from starlette.requests import Request

from mt.errors import HttpError


async def request_fields(request: Request) -> dict:
    """The fields of a JSON body, or of a form and the query string (LibreTranslate's clients send either; it
    reads a form's fields and the query string's alike)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HttpError(400, "Invalid request: the body is not valid UTF-8") from None
    query = _fields(request.query_params)
    if kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
        try:
            form = await request.form()
        except HTTPException as e:  # Starlette's limits: 1,000 fields, 1 MB a field
            raise HttpError(400, f"Invalid request: {e.detail}") from None
        body = {**_fields(form), **query}
    elif text.strip():
        body = _json_object(text)
    else:
        body = query
    _check_text(body)
    return body


def _fields(multi) -> dict:
    """A form's or query string's fields: each field's value, and `q` given more than once as a list."""
    fields = {key: multi.getlist(key) for key in multi.keys()}
    return {key: values if key == "q" and len(values) > 1 else values[0] for key, values in fields.items()}


def _json_object(text: str) -> dict:
    try:
        body = json.loads(text, parse_constant=_not_a_number, parse_float=_finite)
    except json.JSONDecodeError as e:
        raise HttpError(400, f"Invalid request: malformed JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise HttpError(400, "Invalid request: the JSON body is nested too deeply") from None
    except ValueError as e:  # an integer of more than 4,300 digits
        raise HttpError(400, f"Invalid request: malformed JSON ({e})") from None
    if not isinstance(body, dict):
        raise HttpError(400, "Invalid request: the JSON body must be an object")
    return body


def _not_a_number(name: str):
    raise HttpError(400, f"Invalid request: {name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise HttpError(400, f"Invalid request: {text[:40]} is too large a number")
    return number


def _check_text(body: dict) -> None:
    """A 400 for a field holding a lone surrogate (JSON's "\\ud800"): text that is not Unicode."""
    for key, value in body.items():
        try:
            json.dumps([key, value], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise HttpError(400, f"Invalid request: field {ascii(key)} holds a lone surrogate, not Unicode "
                                 "text") from None


def int_field(body: dict, name: str, default: int, low: int, high: int) -> int:
    value = body.get(name, default)
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise HttpError(400, f"Invalid request: {name} must be an integer, got {str(value)[:40]!r}") from None
    if isinstance(value, bool) or not low <= number <= high or (isinstance(value, float) and value != number):
        raise HttpError(400, f"Invalid request: {name} must be an integer from {low} to {high}, got {str(value)[:40]!r}")
    return number


def bool_field(body: dict, name: str) -> bool:
    value = body.get(name, False)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if not isinstance(value, bool):
        raise HttpError(400, f"Invalid request: {name} must be true or false, got {value!r}")
    return value
