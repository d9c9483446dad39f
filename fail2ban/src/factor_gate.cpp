#include "factor_gate.hpp"

#include <hs/hs.h>

#include <algorithm>

namespace gpufilter::fail2ban {

FactorGate::~FactorGate() { hs_free_scratch(scratch_); }

std::unique_ptr<FactorGate> FactorGate::copy() const {
  auto gate = std::make_unique<FactorGate>();
  gate->regex_literals_ = regex_literals_;
  gate->masks_ = masks_;
  gate->always_ = always_;
  gate->literals_ = literals_;
  gate->present_.assign(present_.size(), 0);
  if (database_ != nullptr && hs_clone_scratch(scratch_, &gate->scratch_) == HS_SUCCESS) gate->database_ = database_;
  return gate;  // without a scratch of its own, open
}

std::size_t FactorGate::add(const std::optional<std::vector<std::string>>& factors) {
  const bool always = !factors || factors->empty() ||
                      std::any_of(factors->begin(), factors->end(), [](const std::string& f) { return f.empty(); });
  std::vector<std::uint32_t> ids;
  if (!always) {
    for (const std::string& f : *factors) {
      const auto known = std::find(literals_.begin(), literals_.end(), f);
      ids.push_back(static_cast<std::uint32_t>(known - literals_.begin()));
      if (known == literals_.end()) literals_.push_back(f);
    }
  }
  regex_literals_.push_back(std::move(ids));
  always_.push_back(always);
  return regex_literals_.size() - 1;
}

void FactorGate::build() {
  if (literals_.empty()) return;
  std::vector<const char*> texts;
  std::vector<std::size_t> lengths;
  std::vector<unsigned> flags(literals_.size(), HS_FLAG_SINGLEMATCH);
  std::vector<unsigned> ids;
  for (std::size_t i = 0; i < literals_.size(); ++i) {
    texts.push_back(literals_[i].data());
    lengths.push_back(literals_[i].size());
    ids.push_back(static_cast<unsigned>(i));
  }
  hs_compile_error_t* error = nullptr;
  hs_database_t* compiled = nullptr;
  if (hs_compile_lit_multi(texts.data(), flags.data(), ids.data(), lengths.data(), static_cast<unsigned>(texts.size()),
                           HS_MODE_BLOCK, nullptr, &compiled, &error) != HS_SUCCESS) {
    hs_free_compile_error(error);
    return;
  }
  if (hs_alloc_scratch(compiled, &scratch_) != HS_SUCCESS) {
    hs_free_database(compiled);
    scratch_ = nullptr;
    return;
  }
  database_ = std::shared_ptr<const hs_database>(compiled, [](const hs_database* d) { hs_free_database(const_cast<hs_database*>(d)); });
  present_.assign((literals_.size() + 63) / 64, 0);
  if (literals_.size() <= 64) {
    for (std::size_t r = 0; r < regex_literals_.size(); ++r) {
      std::uint64_t mask = 0;
      if (!always_[r])
        for (const std::uint32_t id : regex_literals_[r]) mask |= std::uint64_t{1} << id;
      masks_.push_back(mask);
    }
  }
}

void FactorGate::look(std::string_view text) {
  looked_at_ = text.data();
  looked_size_ = text.size();
  looked_any_ = true;
  looked_valid_ = false;
  std::fill(present_.begin(), present_.end(), 0);
  const auto found = [](unsigned int id, unsigned long long, unsigned long long, unsigned int, void* context) -> int {
    auto* present = static_cast<std::vector<std::uint64_t>*>(context);
    (*present)[id / 64] |= std::uint64_t{1} << (id % 64);
    return 0;
  };
  if (hs_scan(database_.get(), text.data(), static_cast<unsigned>(text.size()), 0, scratch_, found, &present_) != HS_SUCCESS) {
    return;  // not valid: may_match() says yes to every regex for this text
  }
  looked_valid_ = true;
}

bool FactorGate::may_match_slow(std::size_t regex, std::string_view text) {
  if (database_ == nullptr || regex >= always_.size() || always_[regex] || text.size() > 0xffffffffu) return true;
  if (!looked_any_ || text.data() != looked_at_ || text.size() != looked_size_) look(text);
  if (!looked_valid_) return true;
  if (regex < masks_.size()) return masks_[regex] == 0 || (present_[0] & masks_[regex]) != 0;
  for (const std::uint32_t id : regex_literals_[regex]) {
    if ((present_[id / 64] >> (id % 64)) & 1) return true;
  }
  return false;
}

}  // namespace gpufilter::fail2ban
