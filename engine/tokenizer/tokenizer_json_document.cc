#include "engine/tokenizer/tokenizer_json_document.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace gemma {
namespace {

using Json = nlohmann::json;
constexpr size_t kMaxDepth = 128;

// A SAX handler that builds the tree like nlohmann's own DOM builder, but
// diverts the entries of /model/vocab and /model/merges.
class DocumentBuilder : public nlohmann::json_sax<Json> {
 public:
  explicit DocumentBuilder(TokenizerJsonDocument* document) : document_(document) {}
  const std::string& error() const { return error_; }

  bool null() override { return Value(Json(nullptr)); }
  bool boolean(bool value) override { return Value(Json(value)); }
  bool number_integer(number_integer_t value) override { return Number(value, Json(value)); }
  bool number_unsigned(number_unsigned_t value) override {
    return Number(value > uint64_t(std::numeric_limits<int64_t>::max()) ? -1 : int64_t(value),
                  Json(value));
  }
  bool number_float(number_float_t value, const string_t&) override { return Number(-1, Json(value)); }
  bool string(string_t& value) override;
  bool binary(binary_t&) override { return Fail("unexpected binary value"); }
  bool start_object(std::size_t) override;
  bool key(string_t& key) override;
  bool end_object() override { return Pop(); }
  bool start_array(std::size_t) override;
  bool end_array() override;
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& error) override {
    return Fail(absl::StrCat("invalid JSON at byte ", position, " (",
                             position >= text_size_ ? "file truncated: " : "", error.what(), ")"));
  }
  void set_text_size(size_t size) { text_size_ = size; }

 private:
  enum class Kind { kTree, kVocab, kMerges, kMergePair };
  struct Frame {
    Kind kind = Kind::kTree;
    Json* value = nullptr;  // kTree: the container being filled
    bool is_array = false;
    std::string key;     // objects: the current key
    size_t index = 0;    // arrays: the next element's index
  };

  static Frame NewFrame(Kind kind, Json* value, bool is_array) {
    Frame frame;
    frame.kind = kind;
    frame.value = value;
    frame.is_array = is_array;
    return frame;
  }
  bool Fail(std::string_view message) {
    if (error_.empty()) error_ = absl::StrCat(Path(), ": ", std::string(message));
    return false;
  }
  std::string Path() const;
  bool AtModelField(std::string_view field) const {
    return frames_.size() == 2 && frames_[0].key == "model" && frames_[1].kind == Kind::kTree &&
           !frames_[1].is_array && frames_[1].key == field;
  }
  Json* Insert(Json value);
  bool Value(Json value);
  bool Number(int64_t id, Json value);
  bool Push(Frame frame);
  bool Pop();
  bool AddMerge(std::string first, std::string second, bool is_pair);

  TokenizerJsonDocument* document_;
  std::vector<Frame> frames_;
  std::string error_;
  size_t text_size_ = 0;
  int merges_form_ = 0;  // 0 unknown, 1 strings, 2 pairs
  std::string pair_parts_[2];  // the strings of the ["a", "b"] merge being read
  int num_pair_parts_ = 0;
};

std::string DocumentBuilder::Path() const {
  std::vector<std::string> segments;
  for (const Frame& frame : frames_) {
    if (frame.kind == Kind::kMergePair) continue;
    segments.push_back(frame.is_array ? std::to_string(frame.index) : frame.key);
  }
  return JsonPointer(segments);
}

Json* DocumentBuilder::Insert(Json value) {
  if (frames_.empty()) {
    document_->tree = std::move(value);
    return &document_->tree;
  }
  Frame& top = frames_.back();
  if (top.is_array) {
    top.value->push_back(std::move(value));
    return &top.value->back();
  }
  return &((*top.value)[top.key] = std::move(value));
}

bool DocumentBuilder::Value(Json value) {
  if (frames_.empty() || frames_.back().kind == Kind::kTree) {
    Insert(std::move(value));
    if (!frames_.empty() && frames_.back().is_array) ++frames_.back().index;
    return true;
  }
  if (frames_.back().kind == Kind::kVocab) return Fail("expected a non-negative integer id");
  return Fail("expected a string or a pair of strings");
}

bool DocumentBuilder::Number(int64_t id, Json value) {
  if (frames_.empty() || frames_.back().kind != Kind::kVocab) return Value(std::move(value));
  if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
    return Fail("expected a non-negative integer id");
  }
  document_->vocab.emplace_back(std::move(frames_.back().key), static_cast<int32_t>(id));
  return true;
}

bool DocumentBuilder::string(string_t& value) {
  if (frames_.empty() || frames_.back().kind == Kind::kTree) return Value(Json(std::move(value)));
  Frame& top = frames_.back();
  if (top.kind == Kind::kMergePair) {
    if (num_pair_parts_ == 2) return Fail("expected a string or a pair of strings");
    pair_parts_[num_pair_parts_++] = std::move(value);
    return true;
  }
  if (top.kind == Kind::kVocab) return Fail("expected a non-negative integer id");
  if (value.starts_with("#version")) return true;  // skipped, as `tokenizers` does
  const size_t space = value.find(' ');
  if (space == std::string::npos || value.find(' ', space + 1) != std::string::npos) {
    return Fail("expected a string or a pair of strings");
  }
  return AddMerge(value.substr(0, space), value.substr(space + 1), false);
}

bool DocumentBuilder::AddMerge(std::string first, std::string second, bool is_pair) {
  const int form = is_pair ? 2 : 1;
  if (merges_form_ != 0 && merges_form_ != form) {
    return Fail("merges mix \"a b\" strings and [\"a\", \"b\"] pairs");
  }
  merges_form_ = form;
  document_->merges.emplace_back(std::move(first), std::move(second));
  ++frames_.back().index;
  return true;
}

bool DocumentBuilder::Push(Frame frame) {
  if (frames_.size() >= kMaxDepth) return Fail("nesting too deep");
  frames_.push_back(std::move(frame));
  return true;
}

bool DocumentBuilder::start_object(std::size_t) {
  if (AtModelField("vocab")) {
    document_->has_vocab = true;
    return Push(NewFrame(Kind::kVocab, nullptr, false));
  }
  if (!frames_.empty() && frames_.back().kind != Kind::kTree) {
    return Fail(frames_.back().kind == Kind::kVocab ? "expected a non-negative integer id"
                                                    : "expected a string or a pair of strings");
  }
  return Push(NewFrame(Kind::kTree, Insert(Json::object()), false));
}

bool DocumentBuilder::key(string_t& key) {
  frames_.back().key = std::move(key);
  return true;
}

bool DocumentBuilder::start_array(std::size_t) {
  if (AtModelField("merges")) {
    document_->has_merges = true;
    return Push(NewFrame(Kind::kMerges, nullptr, true));
  }
  if (!frames_.empty() && frames_.back().kind == Kind::kMerges) {
    num_pair_parts_ = 0;
    return Push(NewFrame(Kind::kMergePair, nullptr, true));
  }
  if (!frames_.empty() && frames_.back().kind != Kind::kTree) {
    return Fail(frames_.back().kind == Kind::kVocab ? "expected a non-negative integer id"
                                                    : "expected a string or a pair of strings");
  }
  return Push(NewFrame(Kind::kTree, Insert(Json::array()), true));
}

bool DocumentBuilder::end_array() {
  if (frames_.back().kind != Kind::kMergePair) return Pop();
  frames_.pop_back();
  if (num_pair_parts_ != 2) return Fail("expected a string or a pair of strings");
  return AddMerge(std::move(pair_parts_[0]), std::move(pair_parts_[1]), true);
}

bool DocumentBuilder::Pop() {
  frames_.pop_back();
  if (!frames_.empty() && frames_.back().is_array) ++frames_.back().index;
  return true;
}

}  // namespace

std::string JsonPointer(const std::vector<std::string>& segments) {
  std::string pointer;
  for (const std::string& segment : segments) {
    absl::StrAppend(&pointer, "/", absl::StrReplaceAll(segment, {{"~", "~0"}, {"/", "~1"}}));
  }
  return pointer.empty() ? "/" : pointer;
}

absl::StatusOr<TokenizerJsonDocument> ReadTokenizerJsonDocument(std::string_view text,
                                                                std::string_view file_name) {
  TokenizerJsonDocument document;
  DocumentBuilder builder(&document);
  builder.set_text_size(text.size());
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json,
                                  /*strict=*/true);
  if (!ok || !builder.error().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(file_name), ": ", builder.error().empty() ? "/: invalid JSON" : builder.error()));
  }
  return document;
}

}  // namespace gemma
