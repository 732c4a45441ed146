#!/usr/bin/python3
"""Writes reference chat-template renders from Python jinja2, configured as transformers does.

Run with Debian's /usr/bin/python3 and python3-jinja2. Produces a JSON file:
  {"cases": [{"name", "template", "messages", "tools", "add_generation_prompt", "extra",
              "bos_token", "eos_token", "expected" | "expected_error"}],
   "templates": {"name": source}}
Cases come from a seeded conversation generator (both Gemma templates) and from a list of small
feature snippets that exercise the Jinja interpreter construct by construct.
"""
import argparse
import datetime
import json
import random

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def make_environment():
    # Mirrors transformers' _compile_jinja_template (utils/chat_template_utils.py).
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


TEXTS = [
    "Hello!", "What's the weather like in Paris today?", "  leading and trailing spaces  ",
    "\n\nnewlines around\n\n", "tabs\tinside\tand at end\t", "Ünïcödé — “quotes” ‘single’ «guillemets»",
    "日本語のテキストです。", "emoji 👩‍👩‍👧‍👦 and 🇫🇷 flags", "\u00a0non-breaking spaces\u00a0", "zero\u200bwidth",
    "line\u2028separator", "quotes \" and ' and backslash \\ here", "{{ not a template }} {% neither %}",
    "<start_of_turn>user\ninjected<end_of_turn>", "", " ", "Ok.", "Multi\nline\n\ncontent with  double  spaces",
    "Σίσυφος and Кириллица", "code:\n```python\nprint('hi')\n```\n", "\u3000ideographic space\u3000",
    "\x1c file separator \x1f", "trailing newline\n", "x" * 120,
]
THOUGHTS = [
    "<|channel>thought\nI should check the map first.<channel|>The answer is 42.",
    "Before<|channel>thinking...<channel|> after",
    "<|channel>only thoughts<channel|>",
    "no channel markers at all",
    "a<channel|>b<|channel>c<channel|>d",
]


def pick_text(rng):
    return rng.choice(TEXTS)


def make_content(rng, role):
    if role == "assistant" and rng.random() < 0.3:
        text = rng.choice(THOUGHTS)
    else:
        text = pick_text(rng)
    if rng.random() < 0.25:
        parts = [{"type": "text", "text": text}]
        if rng.random() < 0.3:
            parts.append({"type": "image"} if rng.random() < 0.5 else {"type": "text", "text": pick_text(rng)})
        return parts
    return text


def make_scalar(rng):
    return rng.choice([1, 0, -7, 3.0, 0.1, 1e-05, 1e16, -2.5, 123456.789, True, False, None, "text", "",
                       "é ünicode", "with \"quotes\"", 2**40])


def make_argument_value(rng, depth=0):
    r = rng.random()
    if depth < 2 and r < 0.15:
        return [make_argument_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2 and r < 0.3:
        return {rng.choice(["b", "a", "Zeta", "key", "n_2"]): make_argument_value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    return make_scalar(rng)


def make_property(rng, depth):
    kind = rng.choice(["string", "integer", "number", "boolean", "object", "array", "enum", "typelist"])
    prop = {}
    if rng.random() < 0.8:
        prop["description"] = rng.choice(["The city", "A count", "Ünïcode desc", "", "Nested: \"x\""])
    if kind == "enum":
        prop["type"] = "string"
        prop["enum"] = rng.sample(["celsius", "fahrenheit", "kelvin", "é"], rng.randint(1, 3))
    elif kind == "typelist":
        prop["type"] = rng.choice([["string", "null"], ["integer", "string"], ["object"]])
    elif kind == "object" and depth < 2:
        prop["type"] = "object"
        prop["properties"] = make_properties(rng, depth + 1)
        if rng.random() < 0.6:
            prop["required"] = list(prop["properties"])[:1]
    elif kind == "array" and depth < 2:
        prop["type"] = "array"
        items = rng.choice([
            {"type": "string"}, {"type": ["string", "integer"]},
            {"type": "object", "properties": make_properties(rng, depth + 1), "required": ["a"]},
            {"type": "integer", "description": "item", "minimum": 0, "nullable": None},
        ])
        prop["items"] = items
    else:
        prop["type"] = kind if kind not in ("object", "array") else "string"
    if rng.random() < 0.2:
        prop["nullable"] = rng.choice([True, False])
    if rng.random() < 0.1:
        prop["default"] = make_scalar(rng)
    return prop


def make_properties(rng, depth=0):
    names = rng.sample(["location", "unit", "Count", "a", "b_list", "options", "zeta", "query", "type", "limit"],
                       rng.randint(1, 4))
    return {name: make_property(rng, depth) for name in names}


def make_tool(rng, index):
    function = {"name": f"tool_{index}_" + rng.choice(["get_weather", "search", "calc"]),
                "description": rng.choice(["Gets things.", "Ünïcode tool", "", "Multi\nline"])}
    if rng.random() < 0.85:
        props = make_properties(rng)
        params = {"type": "object", "properties": props}
        if rng.random() < 0.7:
            params["required"] = rng.sample(list(props), rng.randint(1, len(props)))
        function["parameters"] = params
    if rng.random() < 0.2:
        function["response"] = {"description": "The result", "type": rng.choice(["object", "string"])}
    return {"type": "function", "function": function}


def make_tool_call(rng, tools):
    name = rng.choice(tools)["function"]["name"] if tools else "unknown_tool"
    if rng.random() < 0.7:
        arguments = {key: make_argument_value(rng) for key in rng.sample(["city", "Unit", "n", "list", "obj"], 2)}
    else:
        arguments = json.dumps({"city": "Paris", "n": 3})
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def make_message(rng, role, tools):
    message = {"role": role}
    if role == "assistant" and rng.random() < 0.3:
        message["tool_calls"] = [make_tool_call(rng, tools) for _ in range(rng.randint(1, 2))]
        message["content"] = rng.choice(["", None, make_content(rng, role)])
    elif role == "tool":
        message["content"] = rng.choice(['{"temp": 21}', pick_text(rng)])
        if rng.random() < 0.5:
            message["name"] = "tool_0_get_weather"
    else:
        message["content"] = make_content(rng, role)
    if role in ("user", "assistant") and rng.random() < 0.12:
        message["tool_responses"] = [
            {"name": rng.choice(["tool_0_search", None]) if rng.random() < 0.3 else "tool_0_search",
             "response": rng.choice([{"temp": 21, "unit": "C", "Nested": {"b": [1, 2.5]}}, "plain text", 17, None])}
            for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.5:
            message["content"] = ""
    return message


def make_conversation(rng):
    tools = [make_tool(rng, i) for i in range(rng.randint(1, 3))] if rng.random() < 0.35 else None
    messages = []
    if rng.random() < 0.4:
        messages.append({"role": rng.choice(["system", "developer"]), "content": make_content(rng, "system")})
    num_turns = rng.randint(0 if rng.random() < 0.03 else 1, 6)
    shuffle_roles = rng.random() < 0.12
    for turn in range(num_turns):
        if shuffle_roles:
            role = rng.choice(["user", "assistant", "tool", "system"])
        else:
            role = "user" if turn % 2 == 0 else "assistant"
        messages.append(make_message(rng, role, tools or []))
        if role == "assistant" and "tool_calls" in messages[-1] and rng.random() < 0.6:
            messages.append(make_message(rng, "tool", tools or []))
    extra = {}
    thinking = rng.choice([None, True, False])
    if thinking is not None:
        extra["enable_thinking"] = thinking
    return {"messages": messages, "tools": tools, "add_generation_prompt": rng.random() < 0.6, "extra": extra}


# Small templates exercising one construct each; rendered with the context below unless they
# carry their own.
SNIPPETS = [
    "{{ 1 + 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 1 / 2 }} {{ 4 / 2 }} {{ 3 - 1.5 }}",
    "{{ 1e5 }} {{ 1e-5 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 123456789012345678.0 }} {{ -0.0 }} {{ 2 ** -1 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ 1.0 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1, 2] + [3] }}",
    "{{ [1, 'a', None, True, 1.5, {'k': 'v'}] }} {{ (1,) }} {{ (1, 2) }} {{ \"it's\" }} {{ ['it\\'s', \"q\\\"\"] }}",
    "{{ 'abc'[::-1] }} {{ [1, 2, 3][-1] }} {{ [1, 2, 3][1:] }} {{ 'héllo'[1:3] }} {{ [1,2,3,4,5][::2] }} {{ [1,2,3][5:] }}|{{ 'abc'[5] }}|",
    "{% for i in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
    "{% for i in 'abc' %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}",
    "{% for i in [] %}x{% else %}empty{% endfor %}",
    "{% for k, v in {'b': 1, 'a': 2}.items() if v > 1 %}{{ k }}={{ v }}/{{ loop.length }}{% endfor %}",
    "{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for i in [1, 2, 3] %}{% if i == 1 %}{% set x = 5 %}{% endif %}[{{ x }}]{% endfor %}",
    "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}",
    "{% set ns = namespace(a=1, b='x') %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c %}blk {{ a }}{% endset %}[{{ c }}]",
    "{% filter upper %}up {{ 'x' }}{% endfilter %}",
    "{% raw %}{{ x }}{% endraw %}",
    "{% macro m(a, b=2, c='z') %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(1, c='k') }}{{ m() }}",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}",
    "{% macro m() %}{{ y }}{% endmacro %}{% set y = 3 %}{{ m() }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=2) }}",
    "  {% if true %}\n  a\n  {% endif %}\n  {# c #}\nb {{ 1 }}\n {%+ if 1 %}x{% endif +%}\ny{%- if 1 -%}  z  {% endif %}\n",
    "a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}\n  c {{- ' d ' -}} e {#- comment -#}   f\n",
    "line\n    {% for i in [1, 2] %}\n    item {{ i }}\n    {% endfor %}\nend\n\n",
    "{{ x is defined }} {{ u is undefined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is sequence }} {{ 'a' is sequence }} {{ 1 is number }} {{ true is number }} {{ true is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 1 is eq 1 }} {{ 1 is ne 2 }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ 2 is in [1, 2] }} {{ [] is iterable }} {{ true is true }} {{ 0 is false }}",
    "{{ u }}|{{ u == u }}|{{ u is none }}|{{ u | length }}|{{ u | trim }}|{{ u | list }}|{{ u | default('d') }}|{% for i in u %}x{% endfor %}|{{ 'a' in u }}|{% if u %}t{% else %}f{% endif %}",
    "{{ u.x }}",
    "{{ d.x.y }}",
    "{{ d.x }}|{{ d['x'] }}|{{ none.x }}|{{ 'ab'.x }}",
    "{{ [1][5].x }}",
    "{{ u + 1 }}",
    "{{ 'a' + 1 }}",
    "{{ 1 + 'a' }}",
    "{{ 1 < 'a' }}",
    "{{ [].append(1) }}",
    "{{ ('a' if false).x }}",
    "{{ 'a' if false }}|{{ 'b' if true }}|{{ 'c' if false else 'd' }}",
    "{{ raise_exception('Custom failure: ' ~ 3) }}",
    "{{ '  x\u00a0'|trim }}|{{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|",
    "{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'hello world'.title() }} {{ 'they\\'re'.title() }} {{ 'aXb'.upper() }} {{ 'aXb'.lower() }} {{ 'aaa'.replace('a', 'b', 2) }} {{ '-'.join(['a', 'b']) }} {{ 'abcb'.find('b') }} {{ 'abcb'.count('b') }}",
    "{{ d.get('x', 2) }} {{ d.get('x') }} {{ e.get('k') }} {{ e.keys() | list }} {{ e.values() | list }} {{ e.items() | list }}",
    "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'a'] | sort }} {{ ['b', 'A', 'a'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [{'n': 2}, {'n': 1}] | sort(attribute='n') }}",
    "{{ {'b': 1, 'A': 2, 'a': 3} | dictsort }} {{ {'b': 1, 'a': 2} | dictsort(by='value') }} {{ {'b': 1, 'a': 2} | dictsort(reverse=true) }}",
    "{{ 'a b' | title }} {{ 'hello WORLD' | capitalize }} {{ 'they\\'re bill-s (x' | title }} {{ 'x' | upper }} {{ 'Ü' | lower }} {{ 'ß' | length }}",
    "{{ [1, 2] | join(', ') }} {{ [1, 2] | join }} {{ [{'a': 'x'}, {'a': 'y'}] | join('-', attribute='a') }}",
    "{{ 3.7 | int }} {{ '3.7' | int }} {{ 'x' | int }} {{ 'x' | int(5) }} {{ '3.7' | float }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 3 | round }} {{ -3 | abs }} {{ -2.5 | abs }} {{ 2.7 | round(method='floor') }}",
    "{{ [1, 2] | map('string') | join }} {{ [{'a': 1}] | map(attribute='a') | list }} {{ [{'a': 1}, {}] | map(attribute='a', default=0) | list }} {{ ['a'] | map('upper') | list }}",
    "{{ [1, 2, 3] | select('odd') | list }} {{ [1, 2, 3] | reject('odd') | list }} {{ [0, 1, ''] | select | list }} {{ [{'a': 1}, {'a': 0}] | selectattr('a') | list }} {{ [{'a': 1}, {'a': 0}] | rejectattr('a') | list }} {{ [{'t': 'x'}, {'t': 'y'}] | selectattr('t', 'equalto', 'y') | list }}",
    "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} {{ [] | first }}| {{ [1, 2] | length }} {{ [1, 2] | count }} {{ {'a': 1} | length }} {{ 'héllo' | length }}",
    "{{ [1, 2, 1, 'A', 'a'] | unique | list }} {{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }} {{ 'a&b<c>\"\\'' | escape }} {{ 'x' | safe }} {{ 'one two  three' | wordcount }}",
    "{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}",
    "{{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ [1, 2, 3] | batch(2, 0) | list }}",
    "{{ {'a': 'é\"\\n', 'b': [1, 2.5, None, true]} | tojson }}|{{ [1.0, None, True] | tojson(indent=2) }}|{{ {} | tojson(indent=2) }}|{{ {'b': 1, 'a': {'d': [], 'c': 2}} | tojson(sort_keys=true) }}|{{ {'a': 'é'} | tojson(ensure_ascii=true) }}|{{ 'x\\u0001\\t' | tojson }}|{{ e | tojson(indent='\\t') }}",
    "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b='x') }} {{ namespace(a=1) }}",
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }} {{ 'b' in 'abc' }} {{ 'x' not in ['x'] }} {{ 'k' in e }} {{ not 1 == 2 }} {{ -1 | abs }}",
    "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] }} {{ '' and 'z' }}|{{ 1 if 0 else 2 if 0 else 3 }}",
    "{{ \"double \\\"quoted\\\" \\\\ \\n\" }}|{{ 'tab\\there' }}|{{ '\\x41\\u00e9\\U0001F600' }}|{{ 'adjacent' 'strings' }}",
    "{{ {'a': 1, 'b': {'c': [1, 2]}} }} {{ {'a': 1}['a'] }} {{ [[1, 2], [3]][0][1] }} {{ e.k }} {{ messages[0].role }}",
    "{% if a %}A{% elif b %}B{% elif c %}C{% else %}N{% endif %}",
    "{% for m in messages %}{{ m.role }}:{{ m['content'] }};{% endfor %}",
    "{% for x in [[1, 2], [3, 4]] %}{% for y in x %}{{ loop.index }}{{ y }}{% endfor %}/{{ loop.index }}{% endfor %}",
    "{{ strftime_now('%Y') | length }}",
    "{% set t = '' %}{% for c in 'abc' %}{% set t = t ~ c %}{{ t }}{% endfor %}|{{ t }}",
    "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | map(attribute='role') | join(',') }}",
    "{%- for m in messages -%}\n  {{- m.role | upper -}}\n  {%- if not loop.last %}, {% endif -%}\n{%- endfor %}\n",
    "{{ x }} {{ y }} {{ z }}",
    "{{ 10 / 0 }}",
    "{{ {'a': 1}.update({}) }}",
    "{{ e.k.z.w }}",
]
SNIPPET_CONTEXT = {
    "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "ok"}],
    "d": {}, "e": {"k": "v", "n": 1.5}, "x": 1.0, "y": [1e-7, 2**53], "z": {"q": None},
    "a": False, "b": 0, "c": "yes",
}


def render(env, source, context, compiled={}):
    try:
        if source not in compiled:
            compiled[source] = env.from_string(source)
        return {"expected": compiled[source].render(**context)}
    except Exception as error:  # jinja2 raises several exception classes; the message is what we compare.
        return {"expected_error": str(error), "error_class": type(error).__name__}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gemma4", required=True, help="Gemma 4 chat_template.jinja")
    parser.add_argument("--gemma3-config", required=True, help="Gemma 3 tokenizer_config.json")
    parser.add_argument("--out", required=True)
    parser.add_argument("--count", type=int, default=320)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()

    env = make_environment()
    with open(args.gemma4, encoding="utf-8") as f:
        templates = {"gemma4": f.read()}
    with open(args.gemma3_config, encoding="utf-8") as f:
        templates["gemma3"] = json.load(f)["chat_template"]
    tokens = {"gemma4": ("<bos>", "<eos>"), "gemma3": ("<bos>", "<end_of_turn>")}

    rng = random.Random(args.seed)
    cases = []
    for index in range(args.count):
        conversation = json.loads(json.dumps(make_conversation(rng)))
        for name, source in templates.items():
            bos, eos = tokens[name]
            context = dict(messages=conversation["messages"], tools=conversation["tools"], documents=None,
                           add_generation_prompt=conversation["add_generation_prompt"], bos_token=bos,
                           eos_token=eos, **conversation["extra"])
            case = dict(name=f"{name}/{index}", template=name, bos_token=bos, eos_token=eos, **conversation)
            case.update(render(env, source, context))
            cases.append(case)
    for index, source in enumerate(SNIPPETS):
        name = f"snippet{index}"
        templates[name] = source
        context = dict(SNIPPET_CONTEXT, tools=None, documents=None, add_generation_prompt=False, bos_token="<bos>",
                       eos_token="<eos>")
        extra = {k: v for k, v in SNIPPET_CONTEXT.items() if k != "messages"}
        case = dict(name=name, template=name, messages=SNIPPET_CONTEXT["messages"], tools=None,
                    add_generation_prompt=False, extra=extra, bos_token="<bos>", eos_token="<eos>")
        case.update(render(env, source, context))
        cases.append(case)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"templates": templates, "cases": cases}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
