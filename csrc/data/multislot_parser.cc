#include "data/multislot_parser.h"

#include <cstring>

#include "absl/base/attributes.h"
#include "data/number_tokens.h"
#include "data/printable.h"

namespace fleet::data {
namespace {

// A cursor over the tokens of one line, without copying.
class Tokenizer {
 public:
  explicit Tokenizer(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}

  // Skips separators; true when a token follows.
  bool HasToken() {
    while (p_ < end_ && IsSeparator(*p_)) ++p_;
    return p_ < end_;
  }

  // The next token, or an empty view at the end of the line.
  std::string_view Next() {
    HasToken();
    const char* start = p_;
    while (p_ < end_ && !IsSeparator(*p_)) ++p_;
    return std::string_view(start, static_cast<size_t>(p_ - start));
  }

 private:
  const char* p_;
  const char* end_;
};

// A token as the error message shows it: cut to 40 bytes, and any bytes that are not printable
// UTF-8 (NUL, control bytes, Latin-1, binary) escaped as \xNN, so that the message arrives in
// Python whole and decodable.
std::string Quote(std::string_view token) {
  constexpr size_t kMax = 40;
  if (token.size() <= kMax) return absl::StrCat("'", PrintableBytes(token), "'");
  return absl::StrCat("'", PrintableBytes(token.substr(0, kMax)), "...'");
}

// Where a line is, for error messages.
struct LineContext {
  const std::string& file;
  int64_t line_number;
  const std::vector<SlotSpec>& slots;
  SampleBlock* block;

  // Drops the line's values from the block and throws the error for slot #k.
  [[noreturn]] void Fail(size_t k, const std::string& what) const {
    block->Rollback();
    throw InvalidArgument(absl::StrCat(file, ":", line_number, ": slot '", slots[k].name, "' (#",
                                       k + 1, " of ", slots.size(), "): ", what));
  }
};

// The count of slot #k, checked against the slot; the cursor is on its token.
uint64_t ReadCount(Tokenizer* tokens, const LineContext& ctx, size_t k) {
  const SlotSpec& slot = ctx.slots[k];
  uint64_t count = 0;
  std::string_view token = tokens->Next();
  if (ParseCount(token, &count) != NumberError::kNone) {
    ctx.Fail(k, absl::StrCat("count ", Quote(token), " is not a non-negative integer"));
  }
  if (slot.dense && count != static_cast<uint64_t>(slot.width)) {
    ctx.Fail(k, absl::StrCat("count is ", count, " but the slot is dense with ", slot.width,
                             " values per sample"));
  }
  if (!slot.dense && count == 0) {
    ctx.Fail(k, "count is 0; every slot needs at least one value (pad it in the data generator)");
  }
  return count;
}

// What differs between reading counts, int64 ids and float values: the fast and the general
// parser, and (values) the words of the errors.
struct CountRule {
  using Type = uint64_t;
  static bool ReadFast(const char** p, const char* end, uint64_t* v) {
    return ReadCountFast(p, end, v);
  }
  static NumberError Parse(std::string_view token, uint64_t* v) { return ParseCount(token, v); }
};

struct Int64Values {
  using Type = int64_t;
  static bool ReadFast(const char** p, const char* end, int64_t* v) {
    return ReadInt64Fast(p, end, v);
  }
  static NumberError Parse(std::string_view token, int64_t* v) { return ParseInt64(token, v); }
  static constexpr const char* kNotValue = " is not an integer";
  static constexpr const char* kOutOfRange = " is outside the int64 range";
};

struct FloatValues {
  using Type = float;
  static bool ReadFast(const char** p, const char* end, float* v) {
    return ReadFloatFast(p, end, v);
  }
  static NumberError Parse(std::string_view token, float* v) { return ParseFloat(token, v); }
  static constexpr const char* kNotValue = " is not a number";
  static constexpr const char* kOutOfRange = " is outside the float32 range";
};

template <class Values>
void ReadValues(Tokenizer* tokens, const LineContext& ctx, size_t k, uint64_t count,
                std::vector<typename Values::Type>* out) {
  for (uint64_t j = 0; j < count; ++j) {
    if (!tokens->HasToken()) {
      ctx.Fail(k, absl::StrCat("the line ends after ", j, " of ", count, " values"));
    }
    typename Values::Type v = 0;
    std::string_view token = tokens->Next();
    NumberError err = Values::Parse(token, &v);
    if (err == NumberError::kSyntax) {
      ctx.Fail(k, absl::StrCat("value ", j + 1, " ", Quote(token), Values::kNotValue));
    }
    if (err == NumberError::kRange) {
      ctx.Fail(k, absl::StrCat("value ", j + 1, " ", Quote(token), Values::kOutOfRange));
    }
    out->push_back(v);
  }
}

}  // namespace

// The fast path: one pass over a valid line. Each token is read in the common spellings of
// number_tokens.h, which also step over the one separator after it; a token they refuse (more
// separators, a longer or unusual spelling) is found byte by byte and given to its general
// parser. Returns false, leaving what it appended uncommitted, at the first thing wrong (or for a
// blank line): the careful path below then parses the line again to find and word the error.
// Both paths split tokens and parse them alike, so the fast path accepts exactly the lines the
// careful path accepts, with the same values.
class MultiSlotParser::FastLine {
 public:
  // The cursor is a local of Append, not a member: the compiler then keeps it in a register
  // instead of storing and reloading it around every token.
  static bool Append(std::string_view line, const std::vector<FastSlot>& plan, SampleBlock* block) {
    const char* p = line.data();
    const char* const end = line.data() + line.size();
    SlotColumn* column = block->columns();  // walks the block's columns beside the plan
    if (block->size() % kRowsPerPrefetch == 0) PrefetchRowsAhead(plan, column, block->size());
    for (const FastSlot& slot : plan) {
      uint64_t count = 0;
      if (!Read<CountRule>(&p, end, &count)) return false;
      switch (slot.kind) {
        case FastKind::kLodIds:
          if (count == 0 || !ReadValues<Int64Values>(&p, end, count, &column->ids)) return false;
          column->offsets.push_back(column->ids.size());
          break;
        case FastKind::kLodValues:
          if (count == 0 || !ReadValues<FloatValues>(&p, end, count, &column->values)) {
            return false;
          }
          column->offsets.push_back(column->values.size());
          break;
        case FastKind::kDenseIds:
          if (count != slot.width || !ReadValues<Int64Values>(&p, end, count, &column->ids)) {
            return false;
          }
          break;
        case FastKind::kDenseValues:
          if (count != slot.width || !ReadValues<FloatValues>(&p, end, count, &column->values)) {
            return false;
          }
          break;
      }
      ++column;
    }
    while (p < end && IsSeparator(*p)) ++p;
    return p == end;  // nothing after the last slot
  }

 private:
  static constexpr size_t kRowsPerPrefetch = 8;  // one cache line of an 8-byte column
  static constexpr size_t kRowsAhead = 16;

  // Every kRowsPerPrefetch samples, asks for the cache lines that the row kRowsAhead rows on
  // will be written to, in every column. Why: a line appends a value or two to each of ~50
  // columns (CTR-DNN: 26 one-id slots, each with its offsets), too many streams for the
  // hardware prefetchers, and a block's memory was last read by the trainer that freed it, so
  // each new cache line of a column was a store miss. In a PS job, where the reader shares its
  // core with a trainer, those stores held about a quarter of the parser's time (perf). A LoD
  // slot's value position assumes one value a row; for more, the line asked for is a little
  // ahead of where the slot writes. Only lines within a column's capacity are asked for. Always
  // inlined: GCC finds a function that only prefetches free of side effects and, unless it is
  // inlined first, drops the call to it.
  ABSL_ATTRIBUTE_ALWAYS_INLINE static void PrefetchRowsAhead(const std::vector<FastSlot>& plan,
                                                             const SlotColumn* column,
                                                             size_t samples) {
    const size_t row = samples + kRowsAhead;
    for (size_t k = 0; k < plan.size(); ++k) {
      const SlotColumn& c = column[k];
      const uint64_t width = plan[k].width;
      switch (plan[k].kind) {
        case FastKind::kLodIds:
          if (c.offsets.back() + kRowsAhead < c.ids.capacity()) {
            __builtin_prefetch(c.ids.data() + c.offsets.back() + kRowsAhead, 1);
          }
          if (row < c.offsets.capacity()) __builtin_prefetch(c.offsets.data() + row, 1);
          break;
        case FastKind::kLodValues:
          if (c.offsets.back() + kRowsAhead < c.values.capacity()) {
            __builtin_prefetch(c.values.data() + c.offsets.back() + kRowsAhead, 1);
          }
          if (row < c.offsets.capacity()) __builtin_prefetch(c.offsets.data() + row, 1);
          break;
        case FastKind::kDenseIds:
          for (size_t i = row * width; i < (row + kRowsPerPrefetch) * width; i += 8) {
            if (i < c.ids.capacity()) __builtin_prefetch(c.ids.data() + i, 1);
          }
          break;
        case FastKind::kDenseValues:
          for (size_t i = row * width; i < (row + kRowsPerPrefetch) * width; i += 16) {
            if (i < c.values.capacity()) __builtin_prefetch(c.values.data() + i, 1);
          }
          break;
      }
    }
  }

  // The token at *p as a number, moving *p past it: false at the end of the line or for a bad
  // token.
  template <class Rule>
  static bool Read(const char** p, const char* end, typename Rule::Type* out) {
    if (Rule::ReadFast(p, end, out)) return true;
    const char* q = *p;
    while (q < end && IsSeparator(*q)) ++q;
    if (q >= end) return false;
    const char* start = q;
    while (q < end && !IsSeparator(*q)) ++q;
    *p = q;
    return Rule::Parse(std::string_view(start, static_cast<size_t>(q - start)), out) ==
           NumberError::kNone;
  }

  template <class Rule>
  static bool ReadValues(const char** p, const char* end, uint64_t count,
                         std::vector<typename Rule::Type>* out) {
    for (uint64_t j = 0; j < count; ++j) {
      typename Rule::Type v;
      if (!Read<Rule>(p, end, &v)) return false;
      out->push_back(v);
    }
    return true;
  }
};

MultiSlotParser::MultiSlotParser(const std::vector<SlotSpec>* slots) : slots_(slots) {
  plan_.reserve(slots->size());
  for (const SlotSpec& slot : *slots) {
    const bool ids = slot.type == SlotType::kInt64;
    FastKind kind = slot.dense ? (ids ? FastKind::kDenseIds : FastKind::kDenseValues)
                               : (ids ? FastKind::kLodIds : FastKind::kLodValues);
    plan_.push_back({kind, static_cast<uint64_t>(slot.width)});
  }
}

bool MultiSlotParser::Parse(std::string_view line, const std::string& file, int64_t line_number,
                            SampleBlock* block) const {
  // The fast readers may read the 8 bytes before the line's end (digit_words::LoadWord): a
  // shorter line is read from the end of a buffer that has them.
  constexpr size_t kWordBytes = 8;
  char short_line[2 * kWordBytes] = {};
  std::string_view fast_line = line;
  if (line.size() < kWordBytes) {
    std::memcpy(short_line + kWordBytes, line.data(), line.size());
    fast_line = std::string_view(short_line + kWordBytes, line.size());
  }
  if (FastLine::Append(fast_line, plan_, block)) {
    block->CommitSample();
    return true;
  }
  block->Rollback();
  Tokenizer tokens(line);
  const std::vector<SlotSpec>& slots = *slots_;
  const LineContext ctx{file, line_number, slots, block};
  for (size_t k = 0; k < slots.size(); ++k) {
    const SlotSpec& slot = slots[k];
    if (!tokens.HasToken()) {
      if (k == 0) return false;  // a blank line
      ctx.Fail(k, "missing: the line ends before this slot's count");
    }
    uint64_t count = ReadCount(&tokens, ctx, k);
    SlotColumn& column = block->column(k);
    if (slot.type == SlotType::kInt64) {
      ReadValues<Int64Values>(&tokens, ctx, k, count, &column.ids);
    } else {
      ReadValues<FloatValues>(&tokens, ctx, k, count, &column.values);
    }
    if (!slot.dense) {
      column.offsets.push_back(slot.type == SlotType::kInt64 ? column.ids.size()
                                                             : column.values.size());
    }
  }
  if (tokens.HasToken()) {
    ctx.Fail(slots.size() - 1,
             absl::StrCat("unexpected text ", Quote(tokens.Next()),
                          " after the last slot (the line has more slots than the dataset uses)"));
  }
  block->CommitSample();
  return true;
}

}  // namespace fleet::data
