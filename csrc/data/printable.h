#pragma once
// Bytes from data files and commands, made safe to put in an error message: the message becomes
// a Python str (strict UTF-8) and travels as a C string (cut at the first NUL). Valid UTF-8 is
// kept as it is; NUL, other control bytes and bytes that are not UTF-8 become \xNN.

#include <string>
#include <string_view>

namespace fleet::data {

// `keep_newlines` keeps '\n' and '\t' (for multi-line text such as a stderr tail).
std::string PrintableBytes(std::string_view bytes, bool keep_newlines = false);

}  // namespace fleet::data
