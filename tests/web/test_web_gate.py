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
    assert check("POST", "/api/runs", "name=a.zip", **{"content-length": "10"}) is None  # the bytes tell, later
    refusal = check("POST", "/api/runs", "", **{"content-length": "10"})
    assert refusal is not None and refusal.status == 400 and "?name=" in refusal.message
    # a body larger than the largest plain trace the budget can load, whatever its name: refused from its
    # Content-Length (a gzip inflates to at least about its own size)
    for name in ("a.json", "a.json.gz", "a"):
        refusal = check("POST", "/api/runs", f"name={name}", **{"content-length": "600"})
        assert refusal is not None and refusal.status == 413 and "--max-memory" in refusal.message
    # multipart bodies name their file inside the body
    assert (
        check("POST", "/api/runs", "", **{"content-length": "600", "content-type": "multipart/form-data; b=x"}) is None
    )
