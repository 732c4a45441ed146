// safetensors headers and files: valid input, and one test per malformed case.
#include "engine/model/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/engine/model/test_util.h"

namespace gemma {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<SafetensorsHeader> ParseBytes(const std::string& bytes) {
  return ParseSafetensorsHeader(bytes, bytes.size(), "x.safetensors");
}
// A header whose JSON is `header`, followed by `data_bytes` bytes of data.
absl::Status ParseRaw(const std::string& header, size_t data_bytes) {
  return ParseBytes(test::EncodeRaw(header, data_bytes)).status();
}

#define EXPECT_ERROR(status, needle) EXPECT_THAT(std::string((status).message()), HasSubstr(needle))

TEST(SafetensorsHeaderTest, ParsesValidHeader) {
  const std::string bytes = test::EncodeSafetensors({{"a", "BF16", {2, 3}, std::string(12, '\1')},
                                                     {"b", "F32", {4}, std::string(16, '\2')},
                                                     {"c", "F64", {1}, std::string(8, '\3')},
                                                     {"empty", "F16", {0, 5}, ""}});
  auto header = ParseBytes(bytes);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->metadata.at("format"), "pt");
  ASSERT_EQ(header->tensors.size(), 4u);
  const TensorInfo& a = header->tensors.at("a");
  EXPECT_EQ(a.dtype, DType::kBF16);
  EXPECT_THAT(a.shape, ElementsAre(2, 3));
  EXPECT_EQ(a.num_elements(), 6);
  EXPECT_EQ(a.data_begin, 0u);
  EXPECT_EQ(a.data_end, 12u);
  EXPECT_EQ(header->tensors.at("c").dtype, DType::kOther);
  EXPECT_EQ(header->tensors.at("c").dtype_name, "F64");
  EXPECT_EQ(header->tensors.at("empty").num_elements(), 0);
  EXPECT_EQ(header->data_offset + 36, bytes.size());
}

TEST(SafetensorsHeaderTest, DTypeNamesAndSizes) {
  EXPECT_EQ(DTypeName(DType::kBF16), "BF16");
  EXPECT_EQ(DTypeName(DType::kF8E4M3), "F8_E4M3");
  EXPECT_EQ(DTypeName(DType::kOther), "other");
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_EQ(DTypeSize(DType::kF8E4M3), 1u);
  EXPECT_EQ(DTypeSize(DType::kOther), 0u);
}

TEST(SafetensorsHeaderTest, UnknownDTypeIsOtherAndOnlyBoundsChecked) {
  auto header =
      ParseBytes(test::EncodeRaw(R"({"q":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2));
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->tensors.at("q").dtype, DType::kOther);
}

TEST(SafetensorsHeaderTest, EmptyInput) { EXPECT_ERROR(ParseBytes("").status(), "too small"); }

TEST(SafetensorsHeaderTest, ShorterThanLengthPrefix) {
  EXPECT_ERROR(ParseBytes("abcdefg").status(), "x.safetensors: file of 7 bytes is too small");
}

TEST(SafetensorsHeaderTest, HeaderLengthPastEndOfFile) {
  std::string bytes = test::EncodeRaw("{}", 0);
  bytes[0] = 100;
  EXPECT_ERROR(ParseBytes(bytes).status(), "header length 100 runs past the end of the file");
}

TEST(SafetensorsHeaderTest, HeaderLengthAboveCap) {
  std::string bytes = test::EncodeRaw("{}", 0);
  for (int i = 0; i < 8; ++i) bytes[i] = '\xff';  // 2^64-1: must not wrap
  EXPECT_ERROR(ParseBytes(bytes).status(), "exceeds the");
}

TEST(SafetensorsHeaderTest, BufferShorterThanHeader) {
  const std::string bytes = test::EncodeRaw("{}    ", 0);
  auto header = ParseSafetensorsHeader(std::string_view(bytes).substr(0, 10), bytes.size(), "x");
  EXPECT_ERROR(header.status(), "only 10 bytes given for a header of 6");
}

TEST(SafetensorsHeaderTest, BufferLargerThanFileSize) {
  const std::string bytes = test::EncodeRaw("{}", 0);
  EXPECT_ERROR(ParseSafetensorsHeader(bytes, 4, "x").status(), "larger than the file size");
}

TEST(SafetensorsHeaderTest, BadHeaderJson) {
  EXPECT_ERROR(ParseRaw(R"({"a": {"dtype": )", 0), "x.safetensors: invalid JSON");
}

TEST(SafetensorsHeaderTest, HeaderNotAnObject) {
  EXPECT_ERROR(ParseRaw("[1,2,3]", 0), "x.safetensors: header must be a JSON object");
}

TEST(SafetensorsHeaderTest, DuplicateTensorName) {
  EXPECT_ERROR(ParseRaw(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                        R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                        2),
               "duplicate JSON key \"a\"");
}

TEST(SafetensorsHeaderTest, EntryNotAnObject) {
  EXPECT_ERROR(ParseRaw(R"({"w": 3})", 0), "tensor \"w\": entry must be an object");
}

TEST(SafetensorsHeaderTest, MissingDType) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"shape":[1],"data_offsets":[0,2]}})", 2),
               "x.safetensors: tensor \"w\": \"dtype\" is missing");
}

TEST(SafetensorsHeaderTest, MissingShape) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","data_offsets":[0,2]}})", 2),
               "tensor \"w\": \"shape\" is missing");
}

TEST(SafetensorsHeaderTest, NegativeShapeDim) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","shape":[-1],"data_offsets":[0,2]}})", 2),
               "tensor \"w\": \"shape\" must hold non-negative integers");
}

TEST(SafetensorsHeaderTest, FractionalShapeDim) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","shape":[1.5],"data_offsets":[0,2]}})", 2),
               "\"shape\" must hold non-negative integers");
}

TEST(SafetensorsHeaderTest, ShapeProductOverflows) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","shape":[4294967296,4294967296],)"
                        R"("data_offsets":[0,2]}})",
                        2),
               "tensor \"w\": \"shape\" element count overflows");
}

TEST(SafetensorsHeaderTest, ByteLengthOverflows) {
  // 2^62 elements fit int64; their byte count (2^65) overflows uint64.
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"I64","shape":[4611686018427387904],)"
                        R"("data_offsets":[0,8]}})",
                        8),
               "tensor \"w\": byte length 8 does not match I64 shape");
}

TEST(SafetensorsHeaderTest, MissingDataOffsets) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","shape":[1]}})", 2),
               "tensor \"w\": \"data_offsets\" must be a list of two");
}

TEST(SafetensorsHeaderTest, DataOffsetsWrongArity) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","shape":[1],"data_offsets":[0,2,4]}})", 4),
               "\"data_offsets\" must be a list of two non-negative integers");
}

TEST(SafetensorsHeaderTest, DataOffsetsNegative) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","shape":[1],"data_offsets":[-2,0]}})", 4),
               "\"data_offsets\" must be a list of two non-negative integers");
}

TEST(SafetensorsHeaderTest, DataOffsetsBeginAfterEnd) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","shape":[1],"data_offsets":[4,2]}})", 4),
               "tensor \"w\": data_offsets [4, 2] out of range");
}

TEST(SafetensorsHeaderTest, DataOffsetsPastEndOfData) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[2,6]}})", 4),
               "x.safetensors: tensor \"w\": data_offsets [2, 6] out of range of the data "
               "section (4 bytes)");
}

TEST(SafetensorsHeaderTest, WrongDTypeByteLength) {
  EXPECT_ERROR(ParseRaw(R"({"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,6]}})", 8),
               "tensor \"w\": byte length 6 does not match BF16 shape [2, 2]");
}

TEST(SafetensorsHeaderTest, OverlappingTensors) {
  EXPECT_ERROR(ParseRaw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        12),
               "tensors \"a\" and \"b\" overlap");
}

TEST(SafetensorsHeaderTest, TensorInsideAnother) {
  EXPECT_ERROR(ParseRaw(R"({"big":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                        R"("mid":{"dtype":"U8","shape":[1],"data_offsets":[14,15]},)"
                        R"("z":{"dtype":"U8","shape":[1],"data_offsets":[8,9]}})",
                        16),
               "overlap");
}

TEST(SafetensorsHeaderTest, MetadataNotAnObject) {
  EXPECT_ERROR(ParseRaw(R"({"__metadata__": [1]})", 0), "__metadata__ must be an object");
}

TEST(SafetensorsHeaderTest, MetadataValueNotAString) {
  EXPECT_ERROR(ParseRaw(R"({"__metadata__": {"format": 1}})", 0),
               "__metadata__.format must be a string");
}

TEST(SafetensorsHeaderTest, EmptyTensorName) {
  EXPECT_ERROR(ParseRaw(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1),
               "empty name");
}

TEST(SafetensorsFileTest, OpensFixtureAndPointsAtData) {
  const std::string path = test::FortunesDir() + "/model.safetensors";
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorInfo& info = (*file)->header().tensors.at("model.norm.weight");
  const std::string raw = test::ReadFile(path);
  const auto* data = reinterpret_cast<const char*>((*file)->data(info));
  EXPECT_EQ(std::string(data, 512),
            raw.substr((*file)->header().data_offset + info.data_begin, 512));
}

TEST(SafetensorsFileTest, MissingFile) {
  auto file = SafetensorsFile::Open("/nonexistent/model.safetensors");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_ERROR(file.status(), "cannot open /nonexistent/model.safetensors");
}

TEST(SafetensorsFileTest, EmptyFile) {
  test::TempDir dir;
  test::WriteFile(dir.File("e.safetensors"), "");
  EXPECT_ERROR(SafetensorsFile::Open(dir.File("e.safetensors")).status(),
               dir.File("e.safetensors") + ": empty file");
}

TEST(SafetensorsFileTest, Directory) {
  test::TempDir dir;
  EXPECT_ERROR(SafetensorsFile::Open(dir.path()).status(), "not a regular file");
}

TEST(SafetensorsFileTest, TruncatedInData) {
  test::TempDir dir;
  const std::string raw = test::ReadFile(test::FortunesDir() + "/model.safetensors");
  test::WriteFile(dir.File("t.safetensors"), raw.substr(0, raw.size() / 2));
  auto file = SafetensorsFile::Open(dir.File("t.safetensors"));
  ASSERT_FALSE(file.ok());
  EXPECT_ERROR(file.status(), dir.File("t.safetensors") + ": tensor \"model.");
  EXPECT_ERROR(file.status(), "out of range of the data section");
}

TEST(SafetensorsFileTest, TruncatedInHeader) {
  test::TempDir dir;
  const std::string raw = test::ReadFile(test::FortunesDir() + "/model.safetensors");
  test::WriteFile(dir.File("t.safetensors"), raw.substr(0, 100));
  EXPECT_ERROR(SafetensorsFile::Open(dir.File("t.safetensors")).status(),
               "runs past the end of the file (100 bytes)");
}

}  // namespace
}  // namespace gemma
