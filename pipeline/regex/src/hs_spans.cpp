#include "hs_spans.hpp"

#include "gpufilter/hs_cache/compile_cache.hpp"

#include <hs/hs.h>

#include <cstdint>
#include <limits>
#include <new>

namespace gpufilter::regex {
namespace {

struct Best {
  unsigned long long start = std::numeric_limits<unsigned long long>::max();
  unsigned long long end = 0;
};

int on_match(unsigned int, unsigned long long from, unsigned long long to, unsigned int, void* context) {
  auto* best = static_cast<Best*>(context);
  if (from < best->start || (from == best->start && to > best->end)) {
    best->start = from;
    best->end = to;
  }
  return 0;
}

}  // namespace

std::unique_ptr<HsSpans> HsSpans::compile(const std::vector<std::string>& expressions, bool ignore_case) {
  if (expressions.empty()) return nullptr;
  std::vector<const char*> texts;
  std::vector<unsigned> ids;
  for (std::size_t k = 0; k < expressions.size(); ++k) {
    texts.push_back(expressions[k].c_str());
    ids.push_back(static_cast<unsigned>(k));
  }
  const unsigned flag = HS_FLAG_SOM_LEFTMOST | (ignore_case ? HS_FLAG_CASELESS : 0u);
  std::vector<unsigned> flags(expressions.size(), flag);
  hs_compile_error_t* error = nullptr;
  hs_database_t* database = nullptr;
  if (hs_cache::compile({texts, {}, flags, ids}, &database, &error) != HS_SUCCESS) {
    hs_free_compile_error(error);
    return nullptr;
  }
  std::unique_ptr<HsSpans> spans(new HsSpans(std::shared_ptr<hs_database>(database, hs_free_database)));
  return spans;
}

HsSpans::HsSpans(std::shared_ptr<hs_database> database) : database_(std::move(database)) {
  if (hs_alloc_scratch(database_.get(), &scratch_) != HS_SUCCESS) throw std::bad_alloc();
}

HsSpans::~HsSpans() {
  if (scratch_ != nullptr) hs_free_scratch(scratch_);
}

std::unique_ptr<HsSpans> HsSpans::clone() const { return std::unique_ptr<HsSpans>(new HsSpans(database_)); }

bool HsSpans::leftmost_longest(std::string_view text, std::optional<std::pair<std::size_t, std::size_t>>& found) {
  found.reset();
  if (text.size() > std::numeric_limits<unsigned int>::max()) return false;
  Best best;
  if (hs_scan(database_.get(), text.data(), static_cast<unsigned int>(text.size()), 0, scratch_, on_match, &best) !=
      HS_SUCCESS)
    return false;
  if (best.start <= text.size()) found.emplace(static_cast<std::size_t>(best.start), static_cast<std::size_t>(best.end));
  return true;
}

}  // namespace gpufilter::regex
