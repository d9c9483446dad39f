// Daemon::reload (daemon.hpp): SIGHUP and POST /-/reload. A new engine is built beside the
// running one (here, off the scan thread), then swapped in between batches; rules whose
// definition did not change keep their state. A rejected reload leaves everything as it was.
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "daemon.hpp"

namespace gpufilter::daemon {

std::pair<bool, std::string> Daemon::reload() {
  std::lock_guard lock(reload_mutex_);
  std::shared_ptr<ScanEngine> next;
  DaemonConfig next_config;
  // Outputs apply at the next restart, but their token files are read again now, so
  // that a rotated token is used at once; a token file that became unreadable or
  // exposed fails the reload like an invalid configuration.
  std::vector<std::pair<BearerToken*, std::string>> tokens;
  try {
    next_config = load_config(config_path_);
    for (std::size_t i = 0; i < config_.outputs.size(); ++i) {
      if (outputs_.tokens[i]) tokens.emplace_back(outputs_.tokens[i].get(), read_bearer_token(config_.outputs[i]));
    }
    next = build_engine(next_config, *engines_, on_device_fault_);
  } catch (const std::exception& e) {
    metrics_.add("gpufilterd_config_reloads_total", {{"result", "failure"}}, 1);
    metrics_.set("gpufilterd_config_last_reload_successful", {}, 0);
    log_.error("reload rejected; the running configuration stays", {{"error", e.what()}});
    return {false, e.what()};
  }
  for (auto& [holder, token] : tokens) holder->set(std::move(token));
  if (next_config.sources != config_.sources || next_config.outputs != config_.outputs ||
      next_config.server != config_.server || next_config.reload_endpoint != config_.reload_endpoint)
    log_.warn("sources, outputs, server and reload_endpoint apply at the next restart; rules are reloaded now");
  auto swapped = std::make_shared<std::promise<void>>();
  std::future<void> done = swapped->get_future();
  loop_->run_between_batches([this, next, swapped] {
    rules_->replace(next->rules, RuleEngine::Clock::now());
    loop_->replace_scanner(next->engine->scanner());
    // The loop owns what it scans with: a reload that stopped waiting (below) must not
    // free it when this task is destroyed.
    scanning_ = next;
    swapped->set_value();
  });
  if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    log_.error("reload did not take effect within 30 s; the scan loop takes it at its next batch boundary");
    return {false, "the scan loop did not take the new rules within 30 s; it takes them at its next batch boundary"};
  }
  engine_ = next;  // the old engine goes: nothing of it is in flight any more
  metrics_.add("gpufilterd_config_reloads_total", {{"result", "success"}}, 1);
  metrics_.set("gpufilterd_config_last_reload_successful", {}, 1);
  metrics_.set("gpufilterd_rules", {}, static_cast<double>(next_config.rules.size()));
  metrics_.set("gpufilterd_patterns", {}, static_cast<double>(next->rules->patterns().size()));
  log_.info("config reloaded",
            {{"rules", std::to_string(next_config.rules.size())},
             {"patterns", std::to_string(next->rules->patterns().size())}});
  return {true, "reloaded " + std::to_string(next_config.rules.size()) + " rules"};
}

}  // namespace gpufilter::daemon
