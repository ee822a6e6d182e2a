#pragma once
// A check's view for people in reading order (result::note): each group of consecutive notes,
// then the table for people it precedes, then the notes after the last table. Shared by the
// terminal, Markdown and HTML writers, so they show the same things in the same order.
#include <string>
#include <vector>

#include "numprobe/core/result.hpp"

namespace numprobe::reports::detail {

template <class OnNotes, class OnTable>
void for_each_in_reading_order(const result::check_result& c, OnNotes on_notes, OnTable on_table) {
  std::vector<const result::table*> people;
  for (const auto& t : c.tables)
    if (!t.data) people.push_back(&t);
  const auto n = static_cast<std::int32_t>(people.size());
  auto group = [&](std::int32_t at, bool tail) {
    std::vector<std::string> lines;
    for (const auto& note : c.notes)
      if (note.at == at || (tail && note.at > at)) lines.push_back(note.text);
    if (!lines.empty()) on_notes(lines);
  };
  for (std::int32_t i = 0; i < n; ++i) {
    group(i, false);
    on_table(*people[static_cast<std::size_t>(i)]);
  }
  group(n, true);
}

}  // namespace numprobe::reports::detail
