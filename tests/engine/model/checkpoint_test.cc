// Checkpoint::Open: single file and index-sharded layouts, and broken indexes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model/safetensors.h"
#include "engine/model/weights.h"
#include "tests/engine/model/test_util.h"

namespace gemma {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

#define EXPECT_ERROR(status, needle) EXPECT_THAT(std::string((status).message()), HasSubstr(needle))

// The fortunes model split into two shards: tensors with "layers.[0-3]." in
// shard 1, everything else in shard 2.
class ShardedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<test::Blob> blobs = test::ReadBlobs(test::FortunesDir() + "/model.safetensors");
    for (test::Blob& b : blobs) {
      const bool first = b.name.find("layers.") != std::string::npos &&
                         b.name.find("layers.") + 7 < b.name.size() &&
                         b.name[b.name.find("layers.") + 7] < '4';
      (first ? shard1_ : shard2_).push_back(b);
      index_["weight_map"][b.name] = first ? kShard1 : kShard2;
    }
    index_["metadata"] = {{"total_size", 0}};
    std::filesystem::copy_file(test::FortunesDir() + "/config.json", dir_.File("config.json"));
  }

  void Write() {
    test::WriteFile(dir_.File(kShard1), test::EncodeSafetensors(shard1_));
    test::WriteFile(dir_.File(kShard2), test::EncodeSafetensors(shard2_));
    test::WriteJson(dir_.File("model.safetensors.index.json"), index_);
  }

  static constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
  static constexpr const char* kShard2 = "model-00002-of-00002.safetensors";
  test::TempDir dir_;
  std::vector<test::Blob> shard1_, shard2_;
  json index_;
};

TEST_F(ShardedCheckpointTest, LoadsAllTensors) {
  Write();
  auto checkpoint = Checkpoint::Open(dir_.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->tensors().size(), shard1_.size() + shard2_.size());
  ASSERT_NE((*checkpoint)->Find("model.layers.0.layer_scalar"), nullptr);
  EXPECT_EQ((*checkpoint)->Find("model.nope"), nullptr);
  auto model = LoadModel(dir_.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->weights.layers.size(), 8u);
}

TEST_F(ShardedCheckpointTest, ShardMissing) {
  Write();
  std::filesystem::remove(dir_.File(kShard2));
  auto status = Checkpoint::Open(dir_.path()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_ERROR(status, std::string("model.safetensors.index.json lists shard ") + kShard2 +
                           ", which does not exist");
}

TEST_F(ShardedCheckpointTest, IndexedTensorMissingFromShard) {
  test::RemoveBlob(shard2_, "model.norm.weight");
  Write();
  EXPECT_ERROR(
      Checkpoint::Open(dir_.path()).status(),
      std::string("maps tensor model.norm.weight to ") + kShard2 + ", which does not contain it");
}

TEST_F(ShardedCheckpointTest, SameTensorInTwoShards) {
  shard1_.push_back(*test::FindBlob(shard2_, "model.norm.weight"));
  Write();
  auto status = Checkpoint::Open(dir_.path()).status();
  EXPECT_ERROR(status, "tensor model.norm.weight is in");
  EXPECT_ERROR(status, kShard1);
  EXPECT_ERROR(status, kShard2);
}

TEST_F(ShardedCheckpointTest, TensorNotListedInIndex) {
  index_["weight_map"].erase("model.norm.weight");
  Write();
  EXPECT_ERROR(
      Checkpoint::Open(dir_.path()).status(),
      std::string("tensor model.norm.weight is in ") + dir_.File(kShard2) + " but not listed in");
}

TEST_F(ShardedCheckpointTest, IndexWithoutWeightMap) {
  index_.erase("weight_map");
  Write();
  EXPECT_ERROR(Checkpoint::Open(dir_.path()).status(),
               "model.safetensors.index.json: weight_map is missing");
}

TEST_F(ShardedCheckpointTest, IndexShardNameEscapesDirectory) {
  index_["weight_map"]["model.norm.weight"] = "../model.safetensors";
  Write();
  EXPECT_ERROR(Checkpoint::Open(dir_.path()).status(),
               "weight_map.model.norm.weight names \"../model.safetensors\", not a shard file");
}

TEST_F(ShardedCheckpointTest, IndexNotJson) {
  Write();
  test::WriteFile(dir_.File("model.safetensors.index.json"), "{\"weight_map\": ");
  EXPECT_ERROR(Checkpoint::Open(dir_.path()).status(), "index.json: invalid JSON");
}

TEST_F(ShardedCheckpointTest, ShardCorrupt) {
  Write();
  test::WriteFile(dir_.File(kShard1), "garbage!garbage!");
  EXPECT_ERROR(Checkpoint::Open(dir_.path()).status(), kShard1);
}

TEST(CheckpointTest, NoWeightsInDirectory) {
  test::TempDir dir;
  auto status = Checkpoint::Open(dir.path()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_ERROR(status, "no model.safetensors or model.safetensors.index.json in " + dir.path());
}

TEST(CheckpointTest, SingleFileTotalBytes) {
  auto checkpoint = Checkpoint::Open(test::FortunesDir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  // bf16: two bytes per parameter.
  auto config = LoadModelConfig(test::FortunesDir());
  ASSERT_TRUE(config.ok());
  EXPECT_EQ((*checkpoint)->total_bytes(), 2 * static_cast<uint64_t>(config->num_parameters()));
}

}  // namespace
}  // namespace gemma
