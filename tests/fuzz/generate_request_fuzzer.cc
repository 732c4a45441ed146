// libFuzzer entry point: serialized gemma.v1.GenerateRequest bytes through
// the server's request validation (request_builder + the operator limits).
//   bin/generate_request_fuzzer NEW_DIR tests/fuzz/corpus/generate_request
#include <google/protobuf/stubs/logging.h>

#include "tests/fuzz/request_fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Invalid UTF-8 in a `string` field is an expected parse failure; the
  // per-input log line would only slow the fuzzer down.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gemma::fuzz::FuzzGenerateRequest(data, size);
  return 0;
}
