#pragma once
// A byte layout for what one numprobe process hands another of the same build (`--mpi` ranks,
// src/core/rank_share.hpp): numbers as their bytes, strings and vectors with a count first.
// Exact for every double (NaN payloads and infinities included), unlike JSON text. The reader
// trusts no count: a count larger than the bytes left is a backend error naming `place`.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "numprobe/base/error.hpp"

namespace numprobe::wire {

template <class T>
concept plain = std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>;

class writer {
 public:
  template <plain T>
  void put(const T& v) {
    m_bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put(const std::string& s) {
    put<std::uint64_t>(s.size());
    m_bytes.append(s);
  }
  // Vectors of plain structs (no strings, no pointers) as one block.
  template <plain T>
  void put(const std::vector<T>& v) {
    put<std::uint64_t>(v.size());
    m_bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void put(const std::vector<std::string>& v) {
    put<std::uint64_t>(v.size());
    for (const auto& s : v) put(s);
  }
  template <class T>
  void put(const std::optional<T>& v) {
    put<std::uint8_t>(v ? 1 : 0);
    if (v) put(*v);
  }
  [[nodiscard]] std::string take() { return std::move(m_bytes); }

 private:
  std::string m_bytes;
};

class reader {
 public:
  reader(std::string_view bytes, std::string place) : m_bytes(bytes), m_place(std::move(place)) {}

  template <plain T>
  void get(T& v) {
    need(sizeof(T));
    std::memcpy(&v, m_bytes.data() + m_pos, sizeof(T));
    m_pos += sizeof(T);
  }
  void get(std::string& s) {
    const std::size_t n = count(1);
    s.assign(m_bytes.data() + m_pos, n);
    m_pos += n;
  }
  template <plain T>
  void get(std::vector<T>& v) {
    const std::size_t n = count(sizeof(T));
    v.resize(n);
    if (n > 0) std::memcpy(v.data(), m_bytes.data() + m_pos, n * sizeof(T));
    m_pos += n * sizeof(T);
  }
  void get(std::vector<std::string>& v) {
    const std::size_t n = count(sizeof(std::uint64_t));
    v.assign(n, {});
    for (auto& s : v) get(s);
  }
  template <class T>
  void get(std::optional<T>& v) {
    std::uint8_t has = 0;
    get(has);
    if (has == 0) {
      v.reset();
      return;
    }
    v.emplace();
    get(*v);
  }
  // A count of items of at least `item_bytes` each, checked against the bytes left.
  [[nodiscard]] std::size_t count(std::size_t item_bytes) {
    std::uint64_t n = 0;
    get(n);
    if (item_bytes > 0 && n > (m_bytes.size() - m_pos) / item_bytes) truncated();
    return static_cast<std::size_t>(n);
  }
  [[nodiscard]] bool done() const { return m_pos == m_bytes.size(); }
  // Throws unless every byte was read (a message of another layout).
  void finish() const {
    if (!done()) throw_backend_error(m_place, "message has bytes left over: not this build's layout");
  }

 private:
  void need(std::size_t n) const {
    if (n > m_bytes.size() - m_pos) truncated();
  }
  [[noreturn]] void truncated() const { throw_backend_error(m_place, "message is truncated or not this build's layout"); }

  std::string_view m_bytes;
  std::size_t m_pos = 0;
  std::string m_place;
};

}  // namespace numprobe::wire
