#include "engine/tokenizer/bpe_tokenizer_model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/tokenizer/status_macros.h"

namespace gemma {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (!in || error) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string text(size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size))) {
    return absl::DataLossError(absl::StrCat("cannot read ", path));
  }
  return text;
}

// A read-only mapping of a whole file: the 33 MB tokenizer.json of a 262K
// vocabulary is parsed in place, with no zero-filled copy.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path));
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      return absl::NotFoundError(absl::StrCat("cannot open ", path));
    }
    std::unique_ptr<MappedFile> file(new MappedFile());
    file->size_ = static_cast<size_t>(info.st_size);
    if (file->size_ > 0) {
      file->data_ = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    }
    ::close(fd);
    if (file->data_ == MAP_FAILED) return absl::DataLossError(absl::StrCat("cannot read ", path));
    return file;
  }
  ~MappedFile() {
    if (data_ != nullptr && data_ != MAP_FAILED) ::munmap(data_, size_);
  }
  std::string_view text() const {
    return data_ == nullptr ? std::string_view() : std::string_view(static_cast<const char*>(data_), size_);
  }

 private:
  MappedFile() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Ids above this are refused: the tables by id are sized by the largest id.
constexpr int32_t kMaxAddedId = int32_t{1} << 22;

struct Piece {
  size_t begin, end;
  bool is_match;
};

// `text` cut at every occurrence of `pattern` into non-empty pieces, then
// regrouped by `behavior` as `tokenizers`' Split pre-tokenizer does.
std::vector<Piece> SplitPieces(std::string_view text, const SplitRule& rule) {
  std::vector<Piece> found;
  size_t done = 0;
  for (size_t pos = text.find(rule.pattern); pos != std::string_view::npos;
       pos = text.find(rule.pattern, pos + rule.pattern.size())) {
    if (done < pos) found.push_back(Piece{done, pos, false});
    found.push_back(Piece{pos, pos + rule.pattern.size(), true});
    done = pos + rule.pattern.size();
  }
  if (done < text.size()) found.push_back(Piece{done, text.size(), false});
  std::vector<Piece> pieces;
  bool previous_match = false;
  auto visit = [&](const Piece& piece, bool merge_into_last, bool extend_end) {
    if (merge_into_last && !pieces.empty()) {
      (extend_end ? pieces.back().end : pieces.back().begin) = extend_end ? piece.end : piece.begin;
    } else {
      pieces.push_back(piece);
    }
    previous_match = piece.is_match;
  };
  switch (rule.behavior) {
    case SplitBehavior::kRemoved:
      for (const Piece& piece : found) if (!piece.is_match) pieces.push_back(piece);
      break;
    case SplitBehavior::kIsolated:
      pieces = found;
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Piece& piece : found) visit(piece, piece.is_match && !previous_match, true);
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = found.rbegin(); it != found.rend(); ++it) {
        visit(*it, it->is_match && !previous_match, false);
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Piece& piece : found) visit(piece, piece.is_match == previous_match, true);
      break;
  }
  return pieces;
}

// BpeTokenizerModel::max_bytes_per_token: the longest piece or added token
// (an unknown character is one token of at most 4 bytes), times how many
// input bytes a normalized byte can stand for after each shortening Replace.
size_t MaxBytesPerToken(const TokenizerJsonSpec& spec) {
  if (spec.pre_tokenizer && spec.pre_tokenizer->behavior == SplitBehavior::kRemoved) return 0;
  if (spec.model.fuse_unk && !spec.model.byte_fallback) return 0;
  size_t longest = 4;
  for (const auto& [piece, id] : spec.model.vocab) longest = std::max(longest, piece.size());
  for (const AddedToken& token : spec.added_tokens) {
    if (token.lstrip || token.rstrip) return 0;
    longest = std::max(longest, token.content.size());
  }
  for (const ReplaceRule& rule : spec.normalizer) {
    if (rule.content.empty()) {
      if (!rule.pattern.empty()) return 0;
      continue;
    }
    longest *= std::max<size_t>(1, (rule.pattern.size() + rule.content.size() - 1) /
                                       rule.content.size());
  }
  return longest;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizerModel>> BpeTokenizerModel::Load(
    const std::string& json_path) {
  TOKENIZER_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> json_file, MappedFile::Open(json_path));
  const std::string_view json_text = json_file->text();
  const std::filesystem::path config_path =
      std::filesystem::path(json_path).parent_path() / "tokenizer_config.json";
  std::error_code error;
  std::optional<std::string> config_text;
  if (std::filesystem::is_regular_file(config_path, error)) {
    TOKENIZER_ASSIGN_OR_RETURN(config_text, ReadFile(config_path.string()));
  }
  return Create(json_text, json_path, config_text, config_path.string());
}

absl::StatusOr<std::unique_ptr<BpeTokenizerModel>> BpeTokenizerModel::Create(
    std::string_view json_text, std::string_view json_name,
    std::optional<std::string_view> config_text, std::string_view config_name) {
  TOKENIZER_ASSIGN_OR_RETURN(TokenizerJsonSpec spec, ParseTokenizerJson(json_text, json_name));
  std::unique_ptr<BpeTokenizerModel> model(new BpeTokenizerModel());
  if (config_text.has_value()) {
    TOKENIZER_ASSIGN_OR_RETURN(model->config_, ParseTokenizerConfig(*config_text, config_name));
  }
  model->max_bytes_per_token_ = MaxBytesPerToken(spec);
  TOKENIZER_ASSIGN_OR_RETURN(model->bpe_, BpeModel::Create(std::move(spec.model), json_name));
  model->normalizer_ = std::move(spec.normalizer);
  model->pre_tokenizer_ = std::move(spec.pre_tokenizer);
  model->decoder_ = BpeDecoder(std::move(spec.decoder));
  TOKENIZER_RETURN_IF_ERROR(model->InitAddedTokens(std::move(spec.added_tokens), json_name));
  return model;
}

// As `tokenizers` does, an added token whose content the vocabulary has
// takes the vocabulary's id; others keep the id the file gives them.
absl::Status BpeTokenizerModel::InitAddedTokens(std::vector<AddedToken> tokens,
                                                std::string_view json_name) {
  num_ids_ = bpe_->num_ids();
  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (size_t i = 0; i < tokens.size(); ++i) {
    AddedToken& token = tokens[i];
    if (const int32_t id = bpe_->PieceToId(token.content); id >= 0) token.id = id;
    if (token.id >= kMaxAddedId) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(json_name), ": /added_tokens/", i, "/id: id ", token.id, " is too large"));
    }
    num_ids_ = std::max(num_ids_, token.id + 1);
    added_ids_.try_emplace(token.content, token.id);
    added_pieces_.try_emplace(token.id, token.content);
    if (token.normalized) {
      normalized_patterns.push_back(Normalize(token.content));
      normalized.push_back(std::move(token));
    } else {
      raw_patterns.push_back(token.content);
      raw.push_back(std::move(token));
    }
  }
  special_.assign(num_ids_, false);
  for (const auto* group : {&raw, &normalized}) {
    for (const AddedToken& token : *group) {
      if (token.special) special_[token.id] = true;
    }
  }
  raw_matcher_ = AddedTokenMatcher(raw, raw_patterns);
  normalized_matcher_ = AddedTokenMatcher(normalized, normalized_patterns);
  return absl::OkStatus();
}

int32_t BpeTokenizerModel::PieceToId(std::string_view piece) const {
  auto it = added_ids_.find(piece);
  return it != added_ids_.end() ? it->second : bpe_->PieceToId(piece);
}

std::string BpeTokenizerModel::IdToPiece(int32_t id) const {
  if (id < 0 || id >= num_ids_) return "";
  auto it = added_pieces_.find(id);
  if (it != added_pieces_.end()) return it->second;
  return id < bpe_->num_ids() ? bpe_->IdToPiece(id) : "";
}

int32_t BpeTokenizerModel::FindToken(const std::optional<std::string>& configured,
                                     std::string_view fallback) const {
  return PieceToId(configured.has_value() ? std::string_view(*configured) : fallback);
}

SpecialTokens BpeTokenizerModel::FindSpecialTokens() const {
  SpecialTokens special;
  special.pad = FindToken(config_.pad_token, "<pad>");
  special.eos = FindToken(config_.eos_token, "<eos>");
  special.bos = FindToken(config_.bos_token, "<bos>");
  special.unk = FindToken(config_.unk_token, "<unk>");
  special.turn_start = PieceToId("<|turn>");
  special.turn_end = PieceToId("<turn|>");
  return special;
}

std::string BpeTokenizerModel::Normalize(std::string_view text) const {
  std::string normalized(text);
  for (const ReplaceRule& rule : normalizer_) {
    normalized = absl::StrReplaceAll(normalized, {{rule.pattern, rule.content}});
  }
  return normalized;
}

absl::StatusOr<std::vector<int32_t>> BpeTokenizerModel::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<TextSplit> splits;
  raw_matcher_.Split(text, splits);
  for (const TextSplit& split : splits) {
    if (split.id >= 0) {
      ids.push_back(split.id);
    } else {
      EncodeNormalized(Normalize(text.substr(split.begin, split.end - split.begin)), ids);
    }
  }
  return ids;
}

void BpeTokenizerModel::EncodeNormalized(std::string_view text, std::vector<int32_t>& ids) const {
  if (normalized_matcher_.empty()) {
    PreTokenizeAndEncode(text, ids);
    return;
  }
  std::vector<TextSplit> splits;
  normalized_matcher_.Split(text, splits);
  for (const TextSplit& split : splits) {
    if (split.id >= 0) {
      ids.push_back(split.id);
    } else {
      PreTokenizeAndEncode(text.substr(split.begin, split.end - split.begin), ids);
    }
  }
}

void BpeTokenizerModel::PreTokenizeAndEncode(std::string_view text,
                                             std::vector<int32_t>& ids) const {
  if (!pre_tokenizer_.has_value() || text.find(pre_tokenizer_->pattern) == std::string_view::npos) {
    bpe_->TokenizeWord(text, ids);
    return;
  }
  for (const auto& piece : SplitPieces(text, *pre_tokenizer_)) {
    bpe_->TokenizeWord(text.substr(piece.begin, piece.end - piece.begin), ids);
  }
}

std::string BpeTokenizerModel::Decode(std::span<const int32_t> ids,
                                      bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    std::string piece = IdToPiece(id);
    // Ids with no token are dropped, as `tokenizers` does.
    if (piece.empty() || (skip_special_tokens && IsSpecial(id))) continue;
    tokens.push_back(std::move(piece));
  }
  return decoder_.Decode(std::move(tokens));
}

std::string BpeTokenizerModel::TokenBytes(int32_t id) const {
  return IsSpecial(id) ? std::string() : TokenText(id);
}

std::string BpeTokenizerModel::TokenText(int32_t id) const {
  const std::string piece = IdToPiece(id);
  return piece.empty() ? piece : decoder_.TokenText(piece);
}

bool BpeTokenizerModel::IsSpecial(int32_t id) const {
  return id >= 0 && id < num_ids_ && special_[id];
}

bool BpeTokenizerModel::IsByteToken(int32_t id) const {
  return decoder_.HasByteFallback() && !IsSpecial(id) && ParseBytePiece(IdToPiece(id)) >= 0;
}

bool BpeTokenizerModel::StripsFirstSpace(int32_t id) const {
  return decoder_.StripsLeadingSpace() && !IsSpecial(id) && TokenBytes(id).starts_with(' ');
}

}  // namespace gemma
