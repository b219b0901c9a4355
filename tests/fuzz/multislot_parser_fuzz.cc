// Fuzz target: the MultiSlot parser on arbitrary bytes (a data file or a pipe_command's output).
//
// Each input is cut into lines as LineStream cuts them and parsed with three slot kinds (LoD
// int64 ids, dense float32 of width 2, dense int64 label). Besides crashes and sanitizer
// reports, it checks the parser's contract: a malformed line throws InvalidArgument only, leaves
// the block as it was, and its message is whole (no NUL) and valid UTF-8, so that it reaches
// Python intact (see data/printable.h). A line it accepts must hold exactly the values that the
// general parsers (data/number_tokens.h's Parse*, the careful path's) give for its tokens, bit
// for bit: the fast path's word-at-a-time readers may not differ from them on any input.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.h"
#include "data/multislot_parser.h"
#include "data/number_tokens.h"
#include "data/printable.h"
#include "data/slots.h"

namespace {

using fleet::data::MultiSlotParser;
using fleet::data::SampleBlock;
using fleet::data::SlotSpec;

const std::vector<SlotSpec>& Slots() {
  static const auto* slots = new std::vector<SlotSpec>{
      fleet::data::MakeSlotSpec("ids", fleet::DType::kInt64, 1, {-1, 1}),
      fleet::data::MakeSlotSpec("w", fleet::DType::kFloat32, 0, {-1, 2}),
      fleet::data::MakeSlotSpec("label", fleet::DType::kInt64, 0, {-1, 1})};
  return *slots;
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "contract broken: %s\n", what);
    std::abort();
  }
}

// The line's tokens, split at separators as the parser splits them.
std::vector<std::string_view> Tokens(std::string_view line) {
  std::vector<std::string_view> tokens;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && fleet::data::IsSeparator(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !fleet::data::IsSeparator(line[i])) ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

// The sample the parser just appended for `line` against the general parsers on its tokens
// ("n id*n 2 w w 1 label").
void CheckValues(std::string_view line, const SampleBlock& block) {
  using fleet::data::NumberError;
  const std::vector<std::string_view> tokens = Tokens(line);
  uint64_t count = 0;
  Check(!tokens.empty() && fleet::data::ParseCount(tokens[0], &count) == NumberError::kNone,
        "an accepted line starts with a count");
  Check(tokens.size() == count + 6, "an accepted line holds its slots' tokens");
  const std::vector<int64_t>& ids = block.column(0).ids;
  for (uint64_t j = 0; j < count; ++j) {
    int64_t want = 0;
    Check(fleet::data::ParseInt64(tokens[1 + j], &want) == NumberError::kNone &&
              ids[ids.size() - count + j] == want,
          "an id is the general parser's");
  }
  const std::vector<float>& values = block.column(1).values;
  for (size_t j = 0; j < 2; ++j) {
    float want = 0;
    Check(fleet::data::ParseFloat(tokens[count + 2 + j], &want) == NumberError::kNone &&
              std::memcmp(&values[values.size() - 2 + j], &want, sizeof(float)) == 0,
          "a value is the general parser's, bit for bit");
  }
  int64_t label = 0;
  Check(fleet::data::ParseInt64(tokens[count + 5], &label) == NumberError::kNone &&
            block.column(2).ids.back() == label,
        "the label is the general parser's");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  MultiSlotParser parser(&Slots());
  SampleBlock block(&Slots());
  const std::string file = "fuzz-input";
  int64_t line_number = 0;
  size_t begin = 0;
  while (begin <= input.size()) {
    size_t end = input.find('\n', begin);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view line = input.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    const size_t before = block.size();
    try {
      const bool added = parser.Parse(line, file, line_number, &block);
      Check(block.size() == before + (added ? 1 : 0), "a parsed line adds one sample");
      if (added) CheckValues(line, block);
    } catch (const fleet::InvalidArgument& e) {
      const std::string message = e.what();
      Check(block.size() == before, "a failed line leaves the block unchanged");
      Check(message.find('\0') == std::string::npos, "no NUL in the message");
      Check(fleet::data::PrintableBytes(message, true) == message,
            "the message is printable UTF-8");
      Check(message.rfind(file + ":" + std::to_string(line_number) + ": slot '", 0) == 0,
            "the message names file, line and slot");
    }
  }
  return 0;
}
