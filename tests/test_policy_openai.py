"""OpenAIPolicy against the real server of serve.py on 127.0.0.1 (ephemeral ports), serving the random-weight
tiny Llama or a replay file: text and usage, the concurrency bound, retries (429 with Retry-After, 503, 400),
an endpoint that is down, the server's answers to malformed requests, and ``python -m cudaperf.policy.serve``."""

from __future__ import annotations

import asyncio
import email.utils
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("openai")
pytest.importorskip("torch")

from policy_fixtures import tiny_model_dir  # noqa: E402,F401  (a pytest fixture)

from cudaperf.policy import PolicyError, Request, SamplingParams, load_policy  # noqa: E402
from cudaperf.policy.hf import HFPolicy  # noqa: E402
from cudaperf.policy.openai_policy import OpenAIPolicy, estimate_tokens, retry_after_s  # noqa: E402
from cudaperf.policy.replay import ReplayPolicy  # noqa: E402
from cudaperf.policy.serve import PolicyHandler, serve  # noqa: E402

PARAMS = SamplingParams(temperature=0.8, max_new_tokens=5, seed=1)


def req(text: str = "Turn this loop into CUDA.", task: str = "t", sample: int = 0) -> Request:
    return Request(messages=({"role": "user", "content": text},), task_id=task, sample=sample)


@pytest.fixture(scope="module")
def hf_policy(tiny_model_dir):
    p = HFPolicy(tiny_model_dir, device="cpu", context_tokens=64)
    yield p
    p.close()


@pytest.fixture(scope="module")
def server(hf_policy):
    s = serve(hf_policy, "127.0.0.1", 0)
    yield s
    s.close()


def client(url: str, **kw) -> OpenAIPolicy:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("max_backoff_s", 0.05)
    return OpenAIPolicy("tiny", url, **kw)


def raw(server, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        conn.close()


# -- the happy path --------------------------------------------------------------------------------------------
def test_text_and_usage_come_back(server, hf_policy):
    c = client(server.url)
    try:
        requests = [req("add two vectors"), req("Turn the sequential C loop into a CUDA kernel, please.", sample=1)]
        gens = c.generate(requests, PARAMS)
        again = c.generate(requests, PARAMS)
    finally:
        c.close()
    for g, r in zip(gens, requests):
        assert g.error is None and g.text
        assert g.prompt_tokens == hf_policy.count_tokens(r.messages)
        assert (g.completion_tokens, g.finish_reason) == (5, "length")
        assert g.extra["attempts"] == 1 and g.extra["id"].startswith("chatcmpl-")
        assert g.latency_s > 0
    assert [g.text for g in again] == [g.text for g in gens]  # the derived seeds reach the server
    assert gens[0].extra["seed"] != gens[1].extra["seed"]


def test_generate_works_from_a_thread_and_inside_a_running_loop(server):
    c = client(server.url)
    out: list = []
    try:
        t = threading.Thread(target=lambda: out.extend(c.generate([req()], PARAMS)))
        t.start()
        t.join(60)

        async def inside_loop():
            sync = c.generate([req()], PARAMS)  # blocks this loop, but must not fail because a loop runs
            return sync + await c.agenerate([req()], PARAMS)

        out.extend(asyncio.run(inside_loop()))
    finally:
        c.close()
    assert len(out) == 3 and all(g.error is None for g in out)
    assert len({g.text for g in out}) == 1  # same request, same seed


class GatedHandler(PolicyHandler):
    """Counts requests being answered; each waits (up to 2 s) until ``server.gate`` of them are in, so that a client
    that allows more concurrency than it should is seen doing it. The count drops before the answer is sent, so a
    client that starts its next request only after an answer can never be counted twice."""

    def complete(self, request, params, model):
        s = self.server
        with s.cond:
            s.in_flight += 1
            s.max_in_flight = max(s.max_in_flight, s.in_flight)
            s.cond.notify_all()
            if not s.cond.wait_for(lambda: s.in_flight >= s.gate, timeout=2.0):
                s.timeouts += 1
        try:
            return super().complete(request, params, model)
        finally:
            with s.cond:
                s.in_flight -= 1


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_limit_is_respected(hf_policy, concurrency):
    s = serve(hf_policy, "127.0.0.1", 0, handler=GatedHandler)
    s.cond, s.in_flight, s.max_in_flight, s.gate, s.timeouts = threading.Condition(), 0, 0, concurrency, 0
    c = client(s.url, concurrency=concurrency)
    try:
        gens = c.generate([req(sample=i) for i in range(7)], PARAMS)
    finally:
        c.close()
        s.close()
    assert all(g.error is None for g in gens)
    assert s.max_in_flight == concurrency


# -- retries ---------------------------------------------------------------------------------------------------
class FlakyHandler(PolicyHandler):
    """Answers the first ``len(server.failures)`` POSTs with the given (status, headers, body), then serves."""

    def do_POST(self):
        s = self.server
        with s.count_lock:
            s.hits += 1
            n = s.hits
        if n <= len(s.failures):
            status, headers, body = s.failures[n - 1]
            self.read_body()
            self.send_json(status, body, headers)
            return
        super().do_POST()


def flaky(policy, failures):
    s = serve(policy, "127.0.0.1", 0, handler=FlakyHandler)
    s.failures, s.hits, s.count_lock = failures, 0, threading.Lock()
    return s


def err(message, code=None):
    return {"error": {"message": message, "type": "x", "param": None, "code": code}}


def test_retries_honour_retry_after_then_succeed(hf_policy):
    s = flaky(hf_policy, [(429, {"Retry-After": "1"}, err("slow down")), (503, {}, err("overloaded")),
                          (500, {"Retry-After-Ms": "20"}, err("oops"))])
    c = client(s.url, max_retries=5)
    try:
        g = c.generate([req()], PARAMS)[0]
    finally:
        c.close()
        s.close()
    assert g.error is None and g.text
    assert s.hits == 4 and g.extra["attempts"] == 4
    waits = g.extra["retry_waits_s"]
    assert waits[0] == 1.0 and waits[2] == 0.02  # the server's hints
    assert 0 < waits[1] <= 0.05  # exponential backoff with jitter, within max_backoff_s
    assert g.latency_s >= 1.0


def test_retries_run_out_and_the_error_is_carried(hf_policy):
    s = flaky(hf_policy, [(503, {}, err("overloaded"))] * 10)
    c = client(s.url, max_retries=2)
    try:
        g = c.generate([req()], PARAMS)[0]
    finally:
        c.close()
        s.close()
    assert g.finish_reason == "error" and g.text == ""
    assert "HTTP 503" in g.error and "overloaded" in g.error and "after 3 attempts" in g.error
    assert s.hits == 3 and g.extra["attempts"] == 3


@pytest.mark.parametrize("status,code", [(400, None), (401, None), (404, None), (429, "insufficient_quota")])
def test_client_errors_are_not_retried(hf_policy, status, code):
    s = flaky(hf_policy, [(status, {}, err("no", code))] * 5)
    c = client(s.url, max_retries=4)
    try:
        g = c.generate([req()], PARAMS)[0]
    finally:
        c.close()
        s.close()
    assert g.finish_reason == "error" and f"HTTP {status}" in g.error
    assert s.hits == 1 and g.extra["attempts"] == 1 and g.extra["status"] == status


@pytest.mark.parametrize("status", [408, 409])
def test_408_and_409_are_retried(hf_policy, status):
    s = flaky(hf_policy, [(status, {}, err("again"))])
    c = client(s.url)
    try:
        g = c.generate([req()], PARAMS)[0]
    finally:
        c.close()
        s.close()
    assert g.error is None and s.hits == 2


def test_an_endpoint_that_is_down_gives_error_generations():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    c = client(f"http://127.0.0.1:{port}/v1", max_retries=3)
    try:
        gens = c.generate([req(), req(sample=1)], PARAMS)
    finally:
        c.close()
    assert len(gens) == 2
    for g in gens:
        assert g.finish_reason == "error" and g.text == ""
        assert "cannot reach" in g.error and str(port) in g.error
        assert g.extra["attempts"] == 4 and len(g.extra["retry_waits_s"]) == 3


def test_retry_after_parsing():
    assert retry_after_s({"retry-after": "3"}) == 3.0
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_after_s({"retry-after": later}) <= 30
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None


# -- configuration ---------------------------------------------------------------------------------------------
def test_count_tokens_exact_with_a_tokenizer_else_the_estimate(tiny_model_dir, hf_policy):
    messages = ({"role": "system", "content": "You write CUDA."}, {"role": "user", "content": "add two vectors"})
    exact = OpenAIPolicy("tiny", "http://127.0.0.1:1/v1", tokenizer=tiny_model_dir)
    assert exact.count_tokens(messages) == hf_policy.count_tokens(messages)
    rough = OpenAIPolicy("tiny", "http://127.0.0.1:1/v1")
    assert rough.count_tokens(messages) == estimate_tokens(messages) == (5 + 4) + (5 + 4) + 3
    with pytest.raises(PolicyError, match="tokenizer directory"):
        OpenAIPolicy("tiny", "http://127.0.0.1:1/v1", tokenizer="/no/such/dir")


def test_url_model_and_key_from_the_environment(monkeypatch, server):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    p = load_policy("openai:tiny", backoff_s=0.01)
    try:
        assert p.name == f"openai:tiny@{server.url}"
        assert p.generate([req()], PARAMS)[0].error is None
    finally:
        p.close()
    monkeypatch.setenv("OPENAI_MODEL", "from-env")
    assert OpenAIPolicy().model == "from-env"
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(PolicyError, match="OPENAI_BASE_URL"):
        load_policy("openai:tiny")


def test_metadata_reaches_a_replay_policy_behind_the_server(tmp_path):
    f = tmp_path / "rec.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"task_id": "a", "sample": 0, "completion": "alpha-0"}, {"task_id": "a", "sample": 1, "completion": "alpha-1"},
        {"task_id": "b", "completion": "beta"}]) + "\n")
    s = serve(ReplayPolicy(f), "127.0.0.1", 0)
    c = client(s.url, send_metadata=True, max_retries=0)
    try:
        gens = c.generate([req(task="a", sample=1), req(task="a"), req(task="b", sample=5), req(task="zzz")],
                          PARAMS)
    finally:
        c.close()
        s.close()
    assert [g.text for g in gens[:3]] == ["alpha-1", "alpha-0", "beta"]
    assert gens[3].finish_reason == "error" and "HTTP 500" in gens[3].error and "zzz" in gens[3].error
    assert gens[2].completion_tokens == 1  # the replay policy's whitespace count, passed through usage


# -- the server itself -----------------------------------------------------------------------------------------
def test_server_models_and_errors(server, hf_policy):
    status, body = raw(server, "GET", "/v1/models")
    assert status == 200 and body["data"][0]["id"] == hf_policy.name and body["data"][0]["max_model_len"] == 64
    assert raw(server, "GET", "/health")[0] == 200
    cases = [
        (b"{not json", "not JSON", None),
        (b"[1, 2]", "JSON object", None),
        (json.dumps({"model": "m"}).encode(), "messages", "messages"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}], "n": 2}).encode(), "n=1", "n"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}], "stream": True}).encode(), "stream", "stream"),
        (json.dumps({"messages": [{"role": "robot", "content": "x"}]}).encode(), "role", "messages[0].role"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}).encode(), "number",
         "temperature"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}).encode(), ">= 1",
         "max_tokens"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}], "top_p": 0}).encode(), "top_p", "top_p"),
    ]
    for payload, words, param in cases:
        status, body = raw(server, "POST", "/v1/chat/completions", payload)
        assert status == 400, (payload, body)
        assert words in body["error"]["message"] and body["error"]["type"] == "invalid_request_error"
        assert body["error"]["param"] == param
    assert raw(server, "POST", "/v1/nothing", b"{}")[0] == 404
    assert raw(server, "GET", "/v1/chat/completions")[0] == 405
    long = {"messages": [{"role": "user", "content": "loop " * 200}], "max_tokens": 3}
    status, body = raw(server, "POST", "/v1/chat/completions", json.dumps(long).encode())
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"


def test_server_takes_max_tokens_and_text_parts(server):
    body = {"model": "anything", "messages": [{"role": "user", "content": [{"type": "text", "text": "add"}]}],
            "max_tokens": 2, "temperature": 0}
    status, out = raw(server, "POST", "/v1/chat/completions", json.dumps(body).encode())
    assert status == 200 and out["object"] == "chat.completion" and out["model"] == "anything"
    assert out["usage"]["completion_tokens"] == 2 and out["choices"][0]["finish_reason"] == "length"
    assert out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"] + 2
    body["max_completion_tokens"] = 3
    assert raw(server, "POST", "/v1/chat/completions", json.dumps(body).encode())[1]["usage"]["completion_tokens"] == 3


def test_python_m_serve(tmp_path):
    f = tmp_path / "rec.jsonl"
    f.write_text(json.dumps({"task_id": "a", "completion": "hello from the file"}) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "cudaperf.policy.serve", "--policy", f"replay:{f}", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving replay:"), (line, proc.stderr.read() if proc.poll() is not None else "")
        url = line.split(" at ", 1)[1].split()[0]
        c = OpenAIPolicy("m", url, send_metadata=True, max_retries=0)
        try:
            g = c.generate([req(task="a")], PARAMS)[0]
        finally:
            c.close()
        assert g.text == "hello from the file"
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
    assert rc == 0
    bad = subprocess.run([sys.executable, "-m", "cudaperf.policy.serve", "--policy", "nonsense"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "the forms are" in bad.stderr
