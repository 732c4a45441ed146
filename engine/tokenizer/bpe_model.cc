#include "engine/tokenizer/bpe_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gemma {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // "▁"
// Ids above this are refused: the id table is sized by the largest id.
constexpr int64_t kMaxId = int64_t{1} << 22;

size_t CharLength(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The last UTF-8 character of a non-empty string.
std::string_view LastChar(std::string_view text) {
  size_t pos = text.size() - 1;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return text.substr(pos);
}

uint64_t PairKey(int32_t left, int32_t right) {
  return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
}

// A symbol of the word being merged: a doubly linked list over a vector, as in
// `tokenizers`' Word. `len` == 0 marks a symbol merged into its left neighbour.
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  uint32_t len;
};

// A candidate merge of the symbol at `pos` with its right neighbour; the queue
// pops the lowest rank first, then the leftmost position.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : pos > other.pos;
  }
};

}  // namespace

struct BpeModel::Scratch {
  std::vector<int32_t> symbol_ids;
  std::vector<uint32_t> symbol_bytes;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(BpeSpec spec,
                                                           std::string_view context) {
  std::unique_ptr<BpeModel> model(new BpeModel());
  int64_t max_id = -1;
  for (const auto& [piece, id] : spec.vocab) {
    if (id < 0 || id >= kMaxId) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(context), ": /model/vocab: id ", id, " of \"", piece, "\" is out of range"));
    }
    max_id = std::max<int64_t>(max_id, id);
  }
  model->pieces_.resize(max_id + 1);
  model->vocab_.reserve(spec.vocab.size());
  for (auto& [piece, id] : spec.vocab) {
    model->pieces_[id] = piece;
    model->vocab_[std::move(piece)] = id;  // a repeated piece keeps its last id
  }
  model->ascii_ids_.fill(-1);
  for (int c = 0; c < 128; ++c) model->ascii_ids_[c] = model->PieceToId(std::string(1, char(c)));
  model->byte_ids_.fill(-1);
  if (spec.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      model->byte_ids_[b] = model->PieceToId(name);
    }
  }
  if (!spec.unk_token.empty()) {
    model->unk_id_ = model->PieceToId(spec.unk_token);
    if (model->unk_id_ < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(context), ": /model/unk_token: \"", spec.unk_token, "\" is not in /model/vocab"));
    }
  }
  model->byte_fallback_ = spec.byte_fallback;
  model->fuse_unk_ = spec.fuse_unk;
  model->ignore_merges_ = spec.ignore_merges;
  if (absl::Status status = model->BuildMerges(spec, context); !status.ok()) return status;
  model->FindCutRule(spec);
  return model;
}

absl::Status BpeModel::BuildMerges(const BpeSpec& spec, std::string_view context) {
  merges_.reserve(spec.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    joined.assign(left).append(right);
    const int32_t left_id = PieceToId(left), right_id = PieceToId(right);
    const int32_t new_id = PieceToId(joined);
    if (left_id < 0 || right_id < 0 || new_id < 0) {
      const std::string& missing = left_id < 0 ? left : right_id < 0 ? right : joined;
      return absl::InvalidArgumentError(absl::StrCat(std::string(context), ": /model/merges/", rank,
                                                     ": piece \"", missing,
                                                     "\" is not in /model/vocab"));
    }
    // As in `tokenizers`, a repeated pair takes the rank of its last line.
    merges_[PairKey(left_id, right_id)] = Merge{static_cast<int32_t>(rank), new_id};
  }
  return absl::OkStatus();
}

void BpeModel::FindCutRule(const BpeSpec& spec) {
  cuts_enabled_ = PieceToId(kSpaceSymbol) >= 0;
  for (const auto& [left, right] : spec.merges) {
    if (!cuts_enabled_) return;
    if (!right.starts_with(kSpaceSymbol) || left.ends_with(kSpaceSymbol)) continue;
    const int32_t left_id = PieceToId(left);
    if (left.empty() || left_id == unk_id_ || ByteOf(left_id) >= 0) {
      cuts_enabled_ = false;
      return;
    }
    const std::string last(LastChar(left));
    if (std::find(uncuttable_left_chars_.begin(), uncuttable_left_chars_.end(), last) ==
        uncuttable_left_chars_.end()) {
      uncuttable_left_chars_.push_back(last);
    }
  }
}

int32_t BpeModel::PieceToId(std::string_view piece) const {
  auto it = vocab_.find(piece);
  return it == vocab_.end() ? -1 : it->second;
}

int BpeModel::ByteOf(int32_t id) const {
  if (id < 0 || !byte_fallback_) return -1;
  const std::string& piece = pieces_[id];
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece.back() != '>') return -1;
  const int value = static_cast<int>(std::strtol(piece.substr(3, 2).c_str(), nullptr, 16));
  return byte_ids_[value] == id ? value : -1;
}

const BpeModel::Merge* BpeModel::FindMerge(int32_t left, int32_t right) const {
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

bool BpeModel::CanCutBefore(std::string_view word, size_t pos) const {
  if (pos == 0) return false;
  const std::string_view previous = LastChar(word.substr(0, pos));
  if (previous == kSpaceSymbol) return false;
  return std::find(uncuttable_left_chars_.begin(), uncuttable_left_chars_.end(), previous) ==
         uncuttable_left_chars_.end();
}

void BpeModel::TokenizeWord(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const int32_t id = PieceToId(word); id >= 0) {
      ids.push_back(id);
      return;
    }
  }
  Scratch scratch;
  if (!cuts_enabled_) {
    TokenizeChunk(word, scratch, ids);
    return;
  }
  size_t begin = 0;
  for (size_t pos = word.find(kSpaceSymbol, 1); pos != std::string_view::npos;
       pos = word.find(kSpaceSymbol, pos + kSpaceSymbol.size())) {
    if (!CanCutBefore(word, pos)) continue;
    TokenizeChunk(word.substr(begin, pos - begin), scratch, ids);
    begin = pos;
  }
  TokenizeChunk(word.substr(begin), scratch, ids);
}

// The initial symbols, exactly as `tokenizers`' BPE::merge_word makes them,
// including its order quirk: byte-fallback symbols are added before a pending
// unknown symbol is flushed.
void BpeModel::AddCharSymbols(std::string_view chunk, Scratch& scratch) const {
  std::vector<int32_t>& symbol_ids = scratch.symbol_ids;
  std::vector<uint32_t>& symbol_bytes = scratch.symbol_bytes;
  symbol_ids.clear();
  symbol_bytes.clear();
  bool has_unk = false;
  uint32_t unk_bytes = 0;
  for (size_t pos = 0; pos < chunk.size();) {
    const unsigned char lead = static_cast<unsigned char>(chunk[pos]);
    const size_t length = std::min(CharLength(lead), chunk.size() - pos);
    const int32_t id = lead < 0x80 ? ascii_ids_[lead] : PieceToId(chunk.substr(pos, length));
    if (id >= 0) {
      if (has_unk) symbol_ids.push_back(unk_id_), symbol_bytes.push_back(unk_bytes);
      has_unk = false;
      symbol_ids.push_back(id);
      symbol_bytes.push_back(static_cast<uint32_t>(length));
    } else if (byte_fallback_ && std::all_of(chunk.begin() + pos, chunk.begin() + pos + length,
                                             [&](char b) { return byte_ids_[uint8_t(b)] >= 0; })) {
      for (size_t i = pos; i < pos + length; ++i) {
        symbol_ids.push_back(byte_ids_[static_cast<uint8_t>(chunk[i])]);
        symbol_bytes.push_back(1);
      }
    } else if (unk_id_ >= 0) {
      if (has_unk && !fuse_unk_) symbol_ids.push_back(unk_id_), symbol_bytes.push_back(unk_bytes);
      unk_bytes = (has_unk && fuse_unk_ ? unk_bytes : 0) + static_cast<uint32_t>(length);
      has_unk = true;
    }
    pos += length;
  }
  if (has_unk) symbol_ids.push_back(unk_id_), symbol_bytes.push_back(unk_bytes);
}

void BpeModel::TokenizeChunk(std::string_view chunk, Scratch& scratch,
                             std::vector<int32_t>& ids) const {
  AddCharSymbols(chunk, scratch);
  const std::vector<int32_t>& symbol_ids = scratch.symbol_ids;
  const int32_t count = static_cast<int32_t>(symbol_ids.size());
  if (count <= 1) {
    ids.insert(ids.end(), symbol_ids.begin(), symbol_ids.end());
    return;
  }
  std::vector<Symbol>& symbols = scratch.symbols;
  symbols.resize(count);
  std::vector<Candidate>& heap = scratch.heap;
  heap.clear();
  for (int32_t i = 0; i < count; ++i) {
    symbols[i] = Symbol{symbol_ids[i], i - 1, i + 1 < count ? i + 1 : -1, scratch.symbol_bytes[i]};
    if (i + 1 < count) {
      if (const Merge* merge = FindMerge(symbol_ids[i], symbol_ids[i + 1])) {
        heap.push_back(Candidate{merge->rank, i, merge->new_id});
      }
    }
  }
  std::make_heap(heap.begin(), heap.end());
  auto push = [&heap](Candidate candidate) {
    heap.push_back(candidate);
    std::push_heap(heap.begin(), heap.end());
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& current = symbols[top.pos];
    if (current.len == 0 || current.next < 0) continue;
    const int32_t next_pos = current.next;
    // Skip stale candidates the way `tokenizers` does: by the id the pair
    // would now merge into.
    const Merge* now = FindMerge(current.id, symbols[next_pos].id);
    if (now == nullptr || now->new_id != top.new_id) continue;
    current.id = top.new_id;
    current.len += symbols[next_pos].len;
    current.next = symbols[next_pos].next;
    symbols[next_pos].len = 0;
    if (current.next >= 0) symbols[current.next].prev = top.pos;
    if (current.prev >= 0) {
      if (const Merge* merge = FindMerge(symbols[current.prev].id, current.id)) {
        push(Candidate{merge->rank, current.prev, merge->new_id});
      }
    }
    if (current.next >= 0) {
      if (const Merge* merge = FindMerge(current.id, symbols[current.next].id)) {
        push(Candidate{merge->rank, top.pos, merge->new_id});
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace gemma
