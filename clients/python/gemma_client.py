#!/usr/bin/env python3
"""Example Python client for gemma-serve (gemma.v1).

Stubs are generated at start-up into a temporary directory with Debian's
protoc and grpc_python_plugin (python3-grpc-tools bundles a protoc too old for
proto3 `optional`). Needs python3-grpcio and python3-protobuf.

  gemma_client.py --addr 127.0.0.1:50051 generate "The quick brown fox" --max-tokens 40 --greedy
  gemma_client.py --addr 127.0.0.1:50051 chat "Tell me a fortune"
  gemma_client.py --addr 127.0.0.1:50051 chat "Weather in Paris?" --weather-tool --think
  gemma_client.py --addr 127.0.0.1:50051 info
  gemma_client.py --addr 127.0.0.1:50051 tokenize "hello"

Exit codes: 0 ok, 1 RPC error (message printed), 2 bad arguments.
"""
import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

DEFAULT_PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")


def load_stubs(proto_dir):
    """Compiles gemma/v1/gemma.proto and returns (pb2, pb2_grpc) modules."""
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if not protoc or not plugin:
        sys.exit("gemma_client: needs protoc and grpc_python_plugin "
                 "(protobuf-compiler, protobuf-compiler-grpc)")
    out_dir = tempfile.mkdtemp(prefix="gemma_stubs_")
    subprocess.run([protoc, f"-I{proto_dir}", f"--python_out={out_dir}",
                    f"--grpc_out={out_dir}", f"--plugin=protoc-gen-grpc={plugin}",
                    "gemma/v1/gemma.proto"], check=True)
    sys.path.insert(0, out_dir)
    pb2 = importlib.import_module("gemma.v1.gemma_pb2")
    pb2_grpc = importlib.import_module("gemma.v1.gemma_pb2_grpc")
    shutil.rmtree(out_dir, ignore_errors=True)  # modules are loaded; the files are not needed
    return pb2, pb2_grpc


# The example tool of `chat --weather-tool`: its declaration (OpenAI's shape,
# which the chat template renders) and a local implementation.
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_current_weather",
    "description": "Current weather in a city",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}}


def get_current_weather(city, unit="celsius"):
    return {"city": city, "temperature": 21 if unit == "celsius" else 70, "unit": unit,
            "sky": "clear"}


def build_request(pb2, args, prompt):
    request = pb2.GenerateRequest(request_id=args.request_id or "")
    if args.command == "chat":
        request.chat.messages.add(role="user", content=prompt.encode("utf-8"))
        if args.weather_tool:
            request.chat.tools = json.dumps([WEATHER_TOOL]).encode("utf-8")
        if args.think:
            request.chat.template_kwargs = b'{"enable_thinking": true}'
    else:
        request.text = prompt.encode("utf-8")
    s = request.sampling
    if args.greedy:
        s.temperature = 0.0
    elif args.temperature is not None:
        s.temperature = args.temperature
    if args.top_k is not None:
        s.top_k = args.top_k
    if args.top_p is not None:
        s.top_p = args.top_p
    if args.seed is not None:
        s.seed = args.seed
    if args.max_tokens is not None:
        request.stopping.max_tokens = args.max_tokens
    for stop in args.stop or []:
        request.stopping.stop.append(stop.encode("utf-8"))
    if args.ignore_eos:
        request.stopping.ignore_eos = True
    return request


def stream(stub, request, args):
    """Prints one completion; returns (text, tool_calls, ids, finish)."""
    text, calls, ids, finish = [], [], [], None
    for response in stub.Generate(request, timeout=args.timeout):
        if response.reasoning:
            sys.stderr.write(response.reasoning)  # the model's thoughts, apart from the answer
        sys.stdout.write(response.text)
        sys.stdout.flush()
        text.append(response.text)
        calls.extend(response.tool_calls)
        ids.extend(response.token_ids)
        if response.HasField("finish"):
            finish = response.finish
    sys.stdout.write("\n")
    return "".join(text), calls, ids, finish


def answer_tool_calls(request, text, calls):
    """The round trip: the model's calls join the chat as an assistant turn,
    each result as a tool message; returns True when there was anything to run."""
    if not calls:
        return False
    model = request.chat.messages.add(role="assistant", content=text.encode("utf-8"))
    for call in calls:
        model.tool_calls.add(id=call.id, name=call.name, arguments=call.arguments)
        arguments = json.loads(call.arguments)
        result = (get_current_weather(**arguments) if call.name == "get_current_weather"
                  else {"error": f"unknown tool {call.name}"})
        print(f"[tool call {call.id}] {call.name}({call.arguments}) -> {json.dumps(result)}",
              file=sys.stderr)
        request.chat.messages.add(role="tool", name=call.name, tool_call_id=call.id,
                                  content=json.dumps(result).encode("utf-8"))
    return True


def run_generate(pb2, stub, args):
    request = build_request(pb2, args, args.prompt)
    text, calls, ids, finish = stream(stub, request, args)
    # A chat whose answer is a tool call: run the tool and ask again (at most 4 rounds).
    for _ in range(4):
        if args.command != "chat" or not answer_tool_calls(request, text, calls):
            break
        text, calls, more_ids, finish = stream(stub, request, args)
        ids.extend(more_ids)
    if args.print_ids:
        print("ids:", " ".join(str(i) for i in ids))
    if finish is not None:
        reason = pb2.FinishReason.Name(finish.reason)
        print(f"[finish: {reason}, prompt {finish.usage.prompt_tokens} tokens, "
              f"completion {finish.usage.completion_tokens} tokens, "
              f"ttft {finish.timings.time_to_first_token_ms:.1f} ms, "
              f"total {finish.timings.total_ms:.1f} ms]", file=sys.stderr)


def run_info(pb2, stub, args):
    info = stub.GetModelInfo(pb2.GetModelInfoRequest(), timeout=args.timeout)
    print(f"model: {info.model_name}\narchitecture: {info.architecture}\n"
          f"backend: {info.backend}\ncontext_length: {info.context_length}\n"
          f"vocab_size: {info.vocab_size}\nlayers: {info.num_layers} "
          f"({', '.join(info.layer_types)})\ndtype: {info.dtype}\nmax_batch: {info.max_batch}")


def run_tokenize(pb2, stub, args):
    response = stub.Tokenize(pb2.TokenizeRequest(text=args.prompt.encode("utf-8"),
                                                 add_bos=args.add_bos), timeout=args.timeout)
    print(" ".join(str(i) for i in response.ids))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:50051")
    parser.add_argument("--proto-dir", default=DEFAULT_PROTO_DIR)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per call")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("generate", "chat"):
        p = sub.add_parser(name)
        p.add_argument("prompt")
        p.add_argument("--max-tokens", type=int)
        p.add_argument("--temperature", type=float)
        p.add_argument("--top-k", type=int)
        p.add_argument("--top-p", type=float)
        p.add_argument("--seed", type=int)
        p.add_argument("--greedy", action="store_true")
        p.add_argument("--stop", action="append")
        p.add_argument("--ignore-eos", action="store_true")
        p.add_argument("--request-id")
        p.add_argument("--print-ids", action="store_true")
        if name == "chat":
            p.add_argument("--weather-tool", action="store_true",
                           help="declare an example get_current_weather tool and answer its calls")
            p.add_argument("--think", action="store_true", help="enable_thinking")
    sub.add_parser("info")
    p = sub.add_parser("tokenize")
    p.add_argument("prompt")
    p.add_argument("--add-bos", action="store_true")
    return parser.parse_args(argv)  # exits with 2 on bad arguments


def main(argv):
    args = parse_args(argv)
    import grpc  # after argument parsing, so --help works without grpcio
    pb2, pb2_grpc = load_stubs(args.proto_dir)
    stub = pb2_grpc.GemmaStub(grpc.insecure_channel(args.addr))
    commands = {"generate": run_generate, "chat": run_generate, "info": run_info,
                "tokenize": run_tokenize}
    try:
        commands[args.command](pb2, stub, args)
    except grpc.RpcError as error:
        print(f"error: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
