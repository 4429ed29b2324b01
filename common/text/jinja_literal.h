// Reading string literals out of a Jinja chat template's source, for the
// renderers that take their fixed text from the template itself.
#ifndef PDSERVE_COMMON_TEXT_JINJA_LITERAL_H_
#define PDSERVE_COMMON_TEXT_JINJA_LITERAL_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pdserve {

// The value of the literal whose opening quote (' or ") is at t[open],
// with \n, \t, \r and \<char> escapes resolved; nullopt if it never closes.
std::optional<std::string> ReadJinjaString(std::string_view t, size_t open);

// The value of the literal whose closing quote is at t[close]; nullopt if
// t[close] is not a quote or no opening quote precedes it.
std::optional<std::string> ReadJinjaStringEndingAt(std::string_view t, size_t close);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_JINJA_LITERAL_H_
