#include "perseus/server/reply.hpp"

#include <cstdio>

#include "perseus/wire/protocol.hpp"

namespace perseus::server {

std::string Reply::payload() const {
  if (!text.empty()) return text;
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Reply error_reply(int status, std::string_view detail) {
  return {status, {{"detail", printable(detail, kMaxDetailBytes)}}};
}

Reply bad_request(std::string_view d) {
  return error_reply(400, d);
}
Reply unauthorized(std::string_view d) {
  return error_reply(401, d);
}
Reply forbidden(std::string_view d) {
  return error_reply(403, d);
}
Reply not_found(std::string_view d) {
  return error_reply(404, d);
}
Reply method_not_allowed(std::string_view d) {
  return error_reply(405, d);
}
Reply conflict(std::string_view d) {
  return error_reply(409, d);
}
Reply payload_too_large(std::string_view d) {
  return error_reply(413, d);
}
Reply unprocessable(std::string_view d) {
  return error_reply(422, d);
}
Reply too_many_requests(std::string_view d) {
  return error_reply(429, d);
}
Reply internal_error(std::string_view d) {
  return error_reply(500, d);
}
Reply job_failed(std::string_view d) {
  Reply r = error_reply(500, d);
  r.headers.emplace_back(wire::kJobFailedHeader, "1");
  return r;
}
Reply service_unavailable(std::string_view d) {
  return error_reply(503, d);
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF); 0 when it is not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  std::size_t n = c < 0x80           ? 1
                  : (c >> 5) == 0x6  ? 2
                  : (c >> 4) == 0xE  ? 3
                  : (c >> 3) == 0x1E ? 4
                                     : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  if (n == 2 && c < 0xC2) return 0;
  if (n == 3 && ((c == 0xE0 && byte(i + 1) < 0xA0) || (c == 0xED && byte(i + 1) >= 0xA0))) return 0;
  if (n == 4 &&
      ((c == 0xF0 && byte(i + 1) < 0x90) || c > 0xF4 || (c == 0xF4 && byte(i + 1) >= 0x90)))
    return 0;
  return n;
}

}  // namespace

std::string printable(std::string_view raw, std::size_t max_bytes) {
  std::string out;
  for (std::size_t i = 0; i < raw.size();) {
    if (out.size() >= max_bytes) return out + "...";
    std::size_t n = utf8_length(raw, i);
    auto c = static_cast<unsigned char>(raw[i]);
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7F))) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
      out += escaped;
      ++i;
    } else {
      out.append(raw.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace perseus::server
