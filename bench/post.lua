-- The `http-post` scenario of bench/run.py: every request a POST with a 512-byte body.
wrk.method = "POST"
wrk.body = string.rep("p", 512)
wrk.headers["Content-Type"] = "application/octet-stream"
