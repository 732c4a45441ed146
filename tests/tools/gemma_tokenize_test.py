#!/usr/bin/python3
"""gemma-tokenize against the references: chats rendered by Python jinja2 (transformers'
settings, the official Gemma 4 template), ids of text equal to Hugging Face tokenizers' goldens,
--decode round trips, and bad input named by line.

  gemma_tokenize_test.py --bin build/bin/gemma-tokenize --model models/gemma4-fortunes
      --template models/chat_templates/gemma4.jinja --tokenizers tests/data/tokenizers
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine", "chat"))
from make_conversations import make_environment  # noqa: E402  (transformers' jinja2 settings)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": "City"},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"type": "array", "items": {"type": "object", "properties": {
            "day": {"type": "integer"}}}}}}}}

CHATS = [
    {"messages": [{"role": "user", "content": "Hello"}]},
    {"messages": [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "<|channel>thought\nhm<channel|>Hello!"},
                  {"role": "user", "content": "Fortune?"}], "enable_thinking": True},
    {"messages": [{"role": "developer", "content": "Use tools."},
                  {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}],
     "tools": [WEATHER]},
    {"messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [{"day": 1}]}}}]},
                  {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"t\": 21}"}],
     "tools": [WEATHER], "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "ünïcödé 日本 🙂"}], "add_generation_prompt": False},
]


def run(args, lines):
    done = subprocess.run(args, input="".join(json.dumps(x) + "\n" for x in lines),
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout.splitlines(), done.stderr


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--bin", "--model", "--template", "--tokenizers"):
        parser.add_argument(flag, required=True)
    a = parser.parse_args()
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            print("FAIL:", what)

    # 1. Rendering equals jinja2's, byte for byte.
    template = make_environment().from_string(open(a.template, encoding="utf-8").read())
    expected = []
    for chat in CHATS:
        variables = {k: v for k, v in chat.items()}
        variables.setdefault("add_generation_prompt", True)  # gemma-tokenize renders as Generate
        variables.setdefault("tools", None)
        expected.append(template.render(bos_token="<bos>", eos_token="<eos>", **variables))
    rc, rendered, err = run([a.bin, "--model", a.model, "--render"], CHATS)
    check(rc == 0, f"--render exit {rc}: {err}")
    for i, (got, want) in enumerate(zip(rendered, expected)):
        check(json.loads(got) == want, f"chat {i} renders differently:\n{json.loads(got)!r}\n{want!r}")
    check(len(rendered) == len(CHATS), f"{len(rendered)} rendered lines for {len(CHATS)} chats")

    # 2. A chat's ids are the ids of its rendered text.
    rc, chat_ids, err = run([a.bin, "--model", a.model], CHATS)
    rc2, text_ids, err2 = run([a.bin, "--model", a.model], expected)
    check(rc == 0 and rc2 == 0, f"ids exit {rc}/{rc2}: {err}{err2}")
    check(chat_ids == text_ids, "chat ids differ from the ids of the rendered text")
    check(all(json.loads(line)[0] == 2 for line in chat_ids), "chat ids do not start with <bos>")

    # 3. Text ids equal Hugging Face tokenizers' goldens (tokenizer.json), and --decode
    # (special tokens kept, as decode(ids)) equals their decoded text.
    corpus = json.load(open(os.path.join(a.tokenizers, "corpus.json"), encoding="utf-8"))
    golden = json.load(open(os.path.join(a.tokenizers, "golden_gemma4-fortunes.json"), encoding="utf-8"))
    texts = corpus
    check(golden["texts"] == texts, "the golden file is not of this corpus")
    sample = list(range(0, len(texts), 37))
    tok = os.path.join(a.tokenizers, "gemma4-fortunes.tokenizer.json")
    rc, ids, err = run([a.bin, "--tokenizer", tok], [texts[i] for i in sample])
    check(rc == 0, f"text exit {rc}: {err}")
    for line, i in zip(ids, sample):
        check(json.loads(line) == golden["ids"][i], f"corpus string {i}: ids differ")
    rc, decoded, err = run([a.bin, "--tokenizer", tok, "--decode"], [golden["ids"][i] for i in sample])
    check(rc == 0, f"--decode exit {rc}: {err}")
    for line, i in zip(decoded, sample):
        check(json.loads(line) == golden["decoded"][i], f"corpus string {i}: decode differs")

    # 4. Bad input: exit 1 naming the line.
    bad = subprocess.run([a.bin, "--model", a.model], input='"fine"\n{"messages": 3}\n',
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode == 1 and "line 2" in bad.stderr and "messages" in bad.stderr,
          f"bad line: exit {bad.returncode}, stderr {bad.stderr!r}")
    bad = subprocess.run([a.bin, "--model", a.model, "--decode"], input="[1, 99999]\n",
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode == 1 and "line 1" in bad.stderr, f"bad ids: exit {bad.returncode}, {bad.stderr!r}")

    print(f"{len(CHATS) * 2 + len(sample) * 2 + 2 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
