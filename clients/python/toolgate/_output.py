"""What a tool returned, as the request's ``output`` (issue 28): built as
the Claude Code hook and the Go client build it (engine/output.Of), so a
result rule reads ``output.text``, ``output.structured.<path>``,
``output.isError`` and ``output.size`` alike from every client."""

from __future__ import annotations

import json
from typing import Any, Dict

# Compact, keys sorted, nothing escaped that need not be: the text the
# sidecar's own JSON of a value would be (engine.Stringify).
_text = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False).encode
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def build_output(value: Any, is_error: bool = False) -> Dict[str, Any]:
    """The output object for ``value``, what a tool returned: a str is the
    text as it is; a dict, list or tuple is ``structured`` and its compact
    JSON is the text (so text rules read it too); a number or bool is its
    JSON as text; None is no text. ``size`` is the text's length in UTF-8
    bytes. Anything else is encoded as JSON first (TypeError or ValueError
    when it does not encode)."""
    if type(is_error) is not bool:
        raise TypeError("toolgate: evaluate_result() is_error must be a bool, not %s" % type(is_error).__name__)
    if value is not None and not isinstance(value, (str, bool, int, float)):
        try:
            value = json.loads(_encode(value))
        except (TypeError, ValueError, RecursionError) as e:
            cls = TypeError if isinstance(e, TypeError) else ValueError
            raise cls("toolgate: the tool's output does not encode as JSON: %s" % e) from e
    out: Dict[str, Any] = {"isError": is_error}
    if value is None:
        text = ""
    elif isinstance(value, str):
        text = value
    else:
        if isinstance(value, (dict, list)):
            out["structured"] = value
        try:
            text = _text(value)
        except ValueError as e:  # NaN, Infinity
            raise ValueError("toolgate: the tool's output does not encode as JSON: %s" % e) from e
    out["text"] = text
    out["size"] = len(text.encode("utf-8"))
    return out


def delivered(original: Any, text: str) -> Any:
    """What a redact decision delivers in place of ``original``: the
    redacted text, read back as JSON when the original was structured and
    the text still is JSON (a redaction inside a string value keeps it so);
    else the text itself. Never ``original``, which holds what was
    redacted."""
    if isinstance(original, str) or original is None:
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


__all__ = ["build_output", "delivered"]
