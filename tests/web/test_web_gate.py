"""webapp.gate: the checks made from the request line and headers alone, before any body is read."""

from __future__ import annotations

from webapp.gate import Refusal, check_headers, given_token

CONFIG = {"TOKEN": "tok", "MAX_CONTENT_LENGTH": 1000, "MAX_TRACE_BYTES": 500, "LOCAL_ONLY": True}
OK_HEADERS = {"host": "127.0.0.1:8050", "authorization": "Bearer tok"}


def check(method: str = "GET", path: str = "/", query: str = "", **headers: str) -> Refusal | None:
    return check_headers(CONFIG, method, path, query, {**OK_HEADERS, **headers})


def test_token_from_header_query_or_cookie() -> None:
    assert given_token({}, {"authorization": "Bearer a"}) == "a"
    assert given_token({"token": "b"}, {}) == "b"
    assert given_token({}, {"cookie": "x=1; streamscope_token=c"}) == "c"
    assert given_token({}, {"cookie": "bad;;=="}) == ""
    assert check() is None
    assert check(authorization="Bearer nope") == Refusal(401, check(authorization="").message)  # type: ignore[union-attr]
    assert check(authorization="", query="token=tok") is None


def test_host_is_checked_first() -> None:
    refusal = check(host="evil.example:8050", authorization="")
    assert refusal is not None and refusal.status == 403
    assert check(host="localhost") is None and check(host="[::1]:8050") is None


def test_size_and_upload_name_and_budget() -> None:
    refusal = check("POST", "/api/runs", "name=a.json.gz", **{"content-length": "1001"})
    assert refusal == Refusal(413, "upload too large: the limit is 1,000 bytes")
    refusal = check("POST", "/api/runs", "name=a.zip", **{"content-length": "10"})
    assert refusal is not None and refusal.status == 400 and refusal.message.startswith("a.zip: not a trace file")
    refusal = check("POST", "/api/runs", "", **{"content-length": "10"})
    assert refusal is not None and refusal.status == 400 and "?name=" in refusal.message
    # a plain trace larger than the budget can load: refused from its Content-Length
    refusal = check("POST", "/api/runs", "name=a.json", **{"content-length": "600"})
    assert refusal is not None and refusal.status == 413 and "--max-memory" in refusal.message
    # a gzip of that size may fit once inflated and counted: let through
    assert check("POST", "/api/runs", "name=a.json.gz", **{"content-length": "600"}) is None
    # multipart bodies name their file inside the body
    assert (
        check("POST", "/api/runs", "", **{"content-length": "600", "content-type": "multipart/form-data; b=x"}) is None
    )
