#include "tools/bench/bench_conversation.h"

#include <algorithm>
#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "tools/bench/split_mix64.h"

namespace pdserve {
namespace {

template <size_t N>
absl::string_view Pick(SplitMix64& rng, const std::array<absl::string_view, N>& from) {
  return from[static_cast<size_t>(rng.Between(0, static_cast<int>(N) - 1))];
}

// Shuffles with `rng` (Fisher-Yates), not std::shuffle, whose order is
// left to the standard library.
template <typename T>
void Shuffle(SplitMix64& rng, std::vector<T>& v) {
  for (int i = static_cast<int>(v.size()) - 1; i > 0; --i) {
    std::swap(v[static_cast<size_t>(i)], v[static_cast<size_t>(rng.Between(0, i))]);
  }
}

// ---- code-edit ----

constexpr std::array<absl::string_view, 12> kVerbs = {
    "compute", "scale", "filter", "merge", "count", "clamp",
    "score", "smooth", "rank", "split", "collect", "measure"};
constexpr std::array<absl::string_view, 12> kNouns = {
    "totals", "prices", "samples", "weights", "events", "scores",
    "ranges", "offsets", "batches", "limits", "errors", "readings"};
constexpr std::array<absl::string_view, 4> kSecond = {"factor", "step", "bound", "margin"};
constexpr std::array<absl::string_view, 12> kLocals = {
    "total", "count", "acc", "value", "result", "running",
    "buffer", "score", "weight", "offset", "limit", "cursor"};
// (old name, new name) of the parameter to rename.
constexpr std::array<std::pair<absl::string_view, absl::string_view>, 6> kRenames = {{
    {"data", "values"}, {"items", "entries"}, {"xs", "numbers"},
    {"rows", "records"}, {"seq", "sequence"}, {"vals", "measurements"}}};

// Four shapes of a short function over a list parameter {p}, a local {v}
// and a second parameter {k}.
constexpr std::array<absl::string_view, 4> kBodies = {
    "    {v} = 0\n    for x in {p}:\n        if x > {k}:\n            {v} += x * {k}\n"
    "        else:\n            {v} -= x\n    return {v}\n",
    "    {v} = []\n    for i, x in enumerate({p}):\n        if i % {k} == 0:\n"
    "            {v}.append(x)\n    return {v}\n",
    "    if not {p}:\n        return None\n    {v} = {p}[0]\n    for x in {p}[1:]:\n"
    "        {v} = max({v}, x - {k})\n    return {v}\n",
    "    {v} = sum({p}) / max(len({p}), 1)\n    return [x - {v} for x in {p} if abs(x) < {k}]\n",
};

std::vector<ChatMessage> CodeEdit(SplitMix64& rng) {
  const auto& [from, to] = kRenames[static_cast<size_t>(rng.Between(0, kRenames.size() - 1))];
  std::string code;
  for (int i = 0; i < 24; ++i) {
    const absl::string_view k = Pick(rng, kSecond);
    absl::StrAppend(&code, "def ", Pick(rng, kVerbs), "_", Pick(rng, kNouns), "_", i, "(", from,
                    ", ", k, "):\n",
                    absl::StrReplaceAll(Pick(rng, kBodies),
                                        {{"{p}", from}, {"{v}", Pick(rng, kLocals)}, {"{k}", k}}),
                    "\n");
  }
  return {{"user", absl::StrCat("Rewrite the following Python code, renaming the parameter `",
                                from, "` to `", to,
                                "` everywhere. Output only the code.\n\n```python\n", code,
                                "```")}};
}

// ---- summary ----

constexpr std::array<absl::string_view, 16> kPlaces = {
    "Kessock Point", "Ardmore Head", "Stoer Bay", "Corran Narrows", "Rubha Reidh", "Eilean Glas",
    "Dunnet Head", "Noss Head", "Tarbat Ness", "Chanonry", "Cromarty", "Turnberry",
    "Mull of Galloway", "Barns Ness", "Fidra", "Bass Rock"};
constexpr std::array<absl::string_view, 8> kKeepers = {
    "Angus Munro", "Isla Munro", "Ewan Ross", "Morag Grant",
    "Duncan Fraser", "Catriona Bain", "Hamish Reid", "Elspeth Gunn"};

std::vector<std::string> PassageSentences(SplitMix64& rng) {
  const std::string place(Pick(rng, kPlaces));
  const std::string keeper(Pick(rng, kKeepers));
  const int built = rng.Between(1820, 1899);
  const int miles = rng.Between(12, 24);
  const int nights = rng.Between(3, 14);
  return {
      absl::StrFormat("The lighthouse at %s was built in %d from granite quarried on the far "
                      "shore.", place, built),
      absl::StrFormat("Its light, a fixed white beam, could be seen %d miles out on a clear "
                      "night.", miles),
      absl::StrFormat("For forty years the same family kept it, first %s and then a daughter "
                      "who logged every ship that passed.", keeper),
      absl::StrFormat("In the winter of %d a gale tore the lantern glass away.", built + 23),
      absl::StrFormat("For %d nights a paraffin lamp burned in the gallery until the glaziers "
                      "could cross.", nights),
      "The board of commissioners later wrote that no vessel was lost on that coast in all the "
      "years of her keeping.",
      absl::StrFormat("The light was automated in %d, and the keeper's cottage became a small "
                      "museum.", rng.Between(1950, 1990)),
      "Its rooms hold charts, logbooks, brass lamps and a barometer that still works.",
      absl::StrFormat("Visitors reach it by a %d-minute walk along the cliffs from the harbour.",
                      rng.Between(10, 45)),
      "Seals haul out on the rocks below the tower at low tide, and gannets dive offshore in "
      "summer.",
  };
}

std::vector<ChatMessage> Summary(SplitMix64& rng) {
  std::vector<std::string> sentences = PassageSentences(rng);
  Shuffle(rng, sentences);
  return {{"user", absl::StrCat("Summarise this text in five sentences, quoting its key "
                                "sentences word for word.\n\n",
                                absl::StrJoin(sentences, " "))}};
}

// ---- chat ----

constexpr std::array<absl::string_view, 8> kProjects = {
    "inventory", "billing", "ticketing", "survey", "booking", "catalogue", "payroll", "gallery"};
constexpr std::array<absl::string_view, 4> kDatabases = {"PostgreSQL", "MySQL", "SQLite",
                                                          "MariaDB"};

std::vector<ChatMessage> Chat(SplitMix64& rng) {
  const std::string project(Pick(rng, kProjects));
  const int minor = rng.Between(10, 13);
  const int port = rng.Between(5000, 9000);
  const std::string answer = absl::StrFormat(
      "To set up the %s project:\n"
      "1. Install Python 3.%d and create a virtual environment with `python3 -m venv .venv`.\n"
      "2. Activate it with `source .venv/bin/activate`.\n"
      "3. Install the dependencies with `pip install -r requirements.txt`.\n"
      "4. Copy `config.example.yaml` to `config.yaml` and set `database_url` to your %s "
      "instance.\n"
      "5. Run the migrations with `python manage.py migrate`.\n"
      "6. Start the server with `python manage.py runserver 0.0.0.0:%d` and open "
      "http://localhost:%d in a browser.",
      project, minor, Pick(rng, kDatabases), port, port);
  return {
      {"user", absl::StrCat("How do I set up the ", project, " project on my laptop?")},
      {"assistant", answer},
      {"user", "Thanks. Where do the tests live?"},
      {"assistant", absl::StrCat("They are in the `tests/` folder of the ", project,
                                 " repository, one file per module.")},
      {"user", "Repeat your first answer exactly, word for word, then add a step 7 about "
               "running the tests."},
  };
}

// ---- no-copy ----

constexpr std::array<absl::string_view, 8> kCharacters = {
    "lighthouse keeper", "clockmaker", "cartographer", "beekeeper",
    "ferry pilot", "glassblower", "night-train conductor", "orchard keeper"};
constexpr std::array<absl::string_view, 8> kDiscoveries = {
    "a strange signal from the sea", "a door that was not there yesterday",
    "a map of a city that does not exist", "a letter addressed to her future self",
    "a song no one else can hear", "a staircase under the floorboards",
    "a clock that runs backwards", "a bird that speaks in riddles"};

std::vector<ChatMessage> NoCopy(SplitMix64& rng) {
  return {{"user", absl::StrCat("Write a long, imaginative story about a ", Pick(rng, kCharacters),
                                " who discovers ", Pick(rng, kDiscoveries),
                                ". Use vivid, varied language.")}};
}

constexpr std::array<std::pair<absl::string_view, ConversationKind>, 4> kNames = {{
    {"code-edit", ConversationKind::kCodeEdit},
    {"summary", ConversationKind::kSummary},
    {"chat", ConversationKind::kChat},
    {"no-copy", ConversationKind::kNoCopy}}};

}  // namespace

absl::StatusOr<ConversationKind> ParseConversationKind(absl::string_view name) {
  for (const auto& [n, kind] : kNames) {
    if (n == name) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown workload '", name, "': want code-edit, summary, chat or no-copy"));
}

absl::string_view ConversationKindName(ConversationKind kind) {
  for (const auto& [n, k] : kNames) {
    if (k == kind) return n;
  }
  return "?";
}

std::vector<ChatMessage> MakeConversation(ConversationKind kind, uint64_t seed, int64_t index) {
  SplitMix64 rng(seed * 0xd1342543de82ef95ull + static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ull +
                 static_cast<uint64_t>(kind));
  switch (kind) {
    case ConversationKind::kCodeEdit: return CodeEdit(rng);
    case ConversationKind::kSummary: return Summary(rng);
    case ConversationKind::kChat: return Chat(rng);
    case ConversationKind::kNoCopy: return NoCopy(rng);
  }
  return {};
}

}  // namespace pdserve
