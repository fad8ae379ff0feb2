"""Drives a running `hearth serve` with the official `ollama` and `openai` Python packages, as
programs that speak those APIs do. Run by tests/cli/api_clients.rs:

    python api_clients.py BASE_URL ALLOWED_ORIGIN [EMBEDDING_MODEL]

Every check prints one line; the first failure raises, which exits non-zero with the traceback.
"""

import json
import sys
import urllib.error
import urllib.request

import ollama
import openai

BASE, ALLOWED_ORIGIN = sys.argv[1], sys.argv[2]
EMBEDDING_MODEL = sys.argv[3] if len(sys.argv) > 3 else ""
SHORT = {"temperature": 0, "seed": 1, "num_predict": 8}
HELLO = [{"role": "user", "content": "Say hello"}]


def check(what, condition, detail=""):
    if not condition:
        raise AssertionError(f"{what}: {detail}")
    print(f"ok: {what}")


def expect_error(what, call, status, says):
    try:
        call()
    except ollama.ResponseError as e:
        check(what, e.status_code == status and says in e.error, f"{e.status_code} {e.error!r}")
        return
    except openai.APIStatusError as e:
        check(what, e.status_code == status and says in str(e), f"{e.status_code} {e}")
        return
    raise AssertionError(f"{what}: no error")


def raw_get(path, origin=None):
    request = urllib.request.Request(BASE + path)
    if origin:
        request.add_header("Origin", origin)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


client = ollama.Client(host=BASE, timeout=120)

# tags, show, version
models = client.list().models
check("tags lists the installed model", len(models) >= 1, models)
MODEL = models[0].model
show = client.show(MODEL)
check("show gives the family", bool(show.details.family), show.details)
check("show gives the template", bool(show.template))
check("show gives the parameters", "temperature" in (show.parameters or ""))
status, _, body = raw_get("/api/version")
check("version answers", status == 200 and "version" in json.loads(body), body)

# chat and generate, streamed and not
reply = client.chat(model=MODEL, messages=HELLO, options=SHORT, stream=False)
check("chat answers", reply.done and reply.message.role == "assistant", reply)
check("chat counts", reply.eval_count == 8 and reply.prompt_eval_count > 0, reply)
pieces = list(client.chat(model=MODEL, messages=HELLO, options=SHORT, stream=True))
streamed = "".join(p.message.content for p in pieces)
check("chat streams", pieces[-1].done and not pieces[0].done, pieces[-1])
check("streamed text is the same", streamed == reply.message.content, (streamed, reply))
check("durations are nanoseconds", pieces[-1].total_duration >= pieces[-1].eval_duration > 0)

gen = client.generate(model=MODEL, prompt="Why is the sky blue?", options=SHORT)
check("generate answers", gen.done and gen.eval_count == 8, gen)
parts = list(client.generate(model=MODEL, prompt="Why is the sky blue?", options=SHORT, stream=True))
check("generate streams", "".join(p.response for p in parts) == gen.response, parts[-1])

# ps and keep_alive
client.generate(model=MODEL, prompt="", keep_alive="10m")
running = client.ps().models
check("ps shows the loaded model", [m.model for m in running] == [MODEL], running)
check("ps says when it unloads", running[0].expires_at is not None, running[0])
unloaded = client.generate(model=MODEL, prompt="", keep_alive=0)
check("keep_alive 0 unloads", unloaded.done_reason == "unload", unloaded)
check("ps is empty after unloading", client.ps().models == [], client.ps())
client.chat(model=MODEL, messages=HELLO, options=SHORT, keep_alive=-1)
check("keep_alive -1 keeps it", len(client.ps().models) == 1)

# structured output. JSON mode allows any object, whose strings may run to the context's end
# (as with Ollama): a whole answer parses, a cut one is still JSON so far. A schema without free
# strings always ends with its value.
answer = client.chat(model=MODEL, messages=HELLO, format="json", options={"temperature": 0})
if answer.done_reason == "stop":
    check("JSON mode parses", isinstance(json.loads(answer.message.content), dict), answer)
else:
    check("JSON mode writes an object", answer.message.content.lstrip().startswith("{"), answer)
schema = {
    "type": "object",
    "properties": {"age": {"type": "integer"}, "ok": {"type": "boolean"}},
    "required": ["age", "ok"],
    "additionalProperties": False,
}
answer = client.generate(model=MODEL, prompt="A person", format=schema, options={"temperature": 0})
value = json.loads(answer.response)
check(
    "a schema is followed",
    isinstance(value["age"], int) and isinstance(value["ok"], bool) and len(value) == 2,
    answer,
)

# errors, in Ollama's shape
expect_error("an unknown model is 404", lambda: client.chat(model="nope", messages=HELLO), 404, "not found")
expect_error(
    "bad options are 400",
    lambda: client.chat(model=MODEL, messages=HELLO, options={"temperature": "hot"}),
    400,
    "temperature",
)
expect_error(
    "a body over the limit is 413",
    # /api/embed keeps the plain 4 MB; the chat routes take four pictures on top of it.
    lambda: client.embed(model=MODEL, input="x" * (5 << 20)),
    413,
    "larger than this server accepts",
)
expect_error("embed with a chat model is refused", lambda: client.embed(model=MODEL, input="x"), 400, "embeddings")

# origins
status, headers, _ = raw_get("/api/tags", origin=ALLOWED_ORIGIN)
allow = {k.lower(): v for k, v in headers.items()}.get("access-control-allow-origin")
check("an allowed origin gets CORS", status == 200 and allow == ALLOWED_ORIGIN, (status, headers))
status, _, body = raw_get("/api/tags", origin="https://evil.example")
check("another origin is refused", status == 403 and b"evil.example" in body, (status, body))

# OpenAI's client on the same server
oai = openai.OpenAI(base_url=BASE + "/v1", api_key="unused", timeout=120, max_retries=0)
ids = [m.id for m in oai.models.list().data]
check("models lists the model", MODEL in ids, ids)
done = oai.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=8, temperature=0, seed=1)
check("chat completion", done.choices[0].finish_reason == "length" and done.usage.completion_tokens == 8, done)
chunks = list(oai.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=8, temperature=0, seed=1, stream=True))
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check("streamed chat completion", text == done.choices[0].message.content, (text, done))
legacy = oai.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=0)
check("legacy completion", 0 < legacy.usage.completion_tokens <= 6 and legacy.choices[0].text, legacy)
legacy_parts = list(oai.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=0, stream=True))
check("streamed legacy completion", "".join(p.choices[0].text for p in legacy_parts) == legacy.choices[0].text)
json_answer = oai.chat.completions.create(
    model=MODEL, messages=HELLO, temperature=0, response_format={"type": "json_object"}
)
json_text = json_answer.choices[0].message.content
if json_answer.choices[0].finish_reason == "stop":
    check("json_object parses", isinstance(json.loads(json_text), dict), json_text)
else:
    check("json_object writes an object", json_text.lstrip().startswith("{"), json_text)
schema_answer = oai.chat.completions.create(
    model=MODEL,
    messages=HELLO,
    temperature=0,
    response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
)
value = json.loads(schema_answer.choices[0].message.content)
check("json_schema is followed", isinstance(value["age"], int) and len(value) == 2, value)
expect_error("OpenAI's unknown model is 404", lambda: oai.chat.completions.create(model="nope", messages=HELLO), 404, "not found")

# embeddings, with both clients
SENTENCES = ["The weather is lovely today.", "Hearth is a private assistant."]
if EMBEDDING_MODEL:
    embedded = client.embed(model=EMBEDDING_MODEL, input=SENTENCES)
    vectors = embedded.embeddings
    check("ollama embed gives one vector per text", len(vectors) == 2 and len(vectors[0]) == 384, len(vectors))
    norm = sum(x * x for x in vectors[0]) ** 0.5
    check("the vectors are normalized", abs(norm - 1) < 1e-5, norm)
    openai_vectors = [d.embedding for d in oai.embeddings.create(model=EMBEDDING_MODEL, input=SENTENCES).data]
    check(
        "openai embeddings (base64 on the wire) give the same vectors",
        all(abs(a - b) < 1e-6 for u, v in zip(openai_vectors, vectors) for a, b in zip(u, v)),
    )
    same = sum(a * b for a, b in zip(vectors[0], vectors[1]))
    check("different sentences differ", same < 0.9, same)
else:
    print("skipped: no embedding model (scripts/embedding-model.sh makes it)")
    expect_error(
        "openai embeddings without an embedding model are refused",
        lambda: oai.embeddings.create(model="all-minilm-l6-v2", input="x"),
        404,
        "embedding",
    )

print("all client checks passed")
