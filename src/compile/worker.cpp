#include "compile/worker.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

#include "codegen/embedded_templates.hpp"
#include "common/json_depth.hpp"
#include "compile/subprocess.hpp"

namespace flashjit::compile {
namespace {

using nlohmann::json;

constexpr const char* kUnusable = "compile worker unusable: ";
constexpr std::size_t kDetailsTail = 8192;  // bytes of a crashed worker's stderr kept in the error

constexpr ErrorCode kCodes[] = {ErrorCode::invalid_argument, ErrorCode::invalid_config, ErrorCode::unsupported,
                                ErrorCode::no_device,        ErrorCode::driver,         ErrorCode::compile,
                                ErrorCode::cache,            ErrorCode::not_found,      ErrorCode::io,
                                ErrorCode::internal};

ErrorCode code_from(const std::string& name) {
  for (ErrorCode c : kCodes)
    if (name == to_string(c)) return c;
  return ErrorCode::internal;
}

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0);
    for (std::size_t k = 0; k < 4; ++k) out.push_back(k <= n ? kBase64[(v >> (18 - 6 * k)) & 63] : '=');
  }
  return out;
}

std::optional<std::string> unbase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t v = 0;
    int pad = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      int d;
      if (c == '=' && k >= 2 && i + 4 == text.size()) d = 0, ++pad;
      else if (pad) return std::nullopt;
      else if (const char* p = std::char_traits<char>::find(kBase64, 64, c)) d = static_cast<int>(p - kBase64);
      else return std::nullopt;
      v = v << 6 | static_cast<std::uint32_t>(d);
    }
    for (int k = 0; k < 3 - pad; ++k) out.push_back(static_cast<char>((v >> (16 - 8 * k)) & 0xff));
  }
  return out;
}

std::string tail(const std::string& text) {
  return text.size() <= kDetailsTail ? text : "...\n" + text.substr(text.size() - kDetailsTail);
}

// The reply line of the worker's stdout (the last line that decodes), if any.
std::optional<Result<CompiledKernel>> reply_of(const std::string& out, LogLines& messages) {
  std::size_t end = out.size();
  while (end > 0) {
    const std::size_t start = out.rfind('\n', end - 1);
    const std::size_t from = start == std::string::npos ? 0 : start + 1;
    if (auto r = decode_reply(std::string_view(out).substr(from, end - from), &messages)) return r;
    if (start == std::string::npos) break;
    end = start;
  }
  return std::nullopt;
}

}  // namespace

json ptxas_to_json(const PtxasStats& p) {
  return {{"registers", p.registers}, {"spill_stores", p.spill_stores}, {"spill_loads", p.spill_loads},
          {"stack_frame", p.stack_frame}, {"static_smem", p.static_smem}, {"setmaxnreg_ignored", p.setmaxnreg_ignored}};
}

PtxasStats ptxas_from_json(const json& p) {
  PtxasStats s;
  s.registers = p.at("registers").get<int>();
  s.spill_stores = p.at("spill_stores").get<int>();
  s.spill_loads = p.at("spill_loads").get<int>();
  s.stack_frame = p.at("stack_frame").get<int>();
  s.static_smem = p.at("static_smem").get<int>();
  s.setmaxnreg_ignored = p.at("setmaxnreg_ignored").get<bool>();
  return s;
}

json error_to_json(const Error& e) {
  return {{"code", to_string(e.code)}, {"message", e.message}, {"context", e.context}, {"details", e.details}};
}

Error error_from_json(const json& e) {
  auto text = [&](const char* field) {
    auto it = e.find(field);
    return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  Error error(code_from(text("code")), text("message"), text("details"));
  if (auto it = e.find("context"); it != e.end() && it->is_array())
    for (const auto& line : *it)
      if (line.is_string()) error.context.push_back(line.get<std::string>());
  return error;
}

std::string build_stamp() {
  return fmt::format("flashjit {} templates {} nvrtc {}", FLASHJIT_VERSION, codegen::templates_hash(), nvrtc_version());
}

std::string encode_request(const codegen::GeneratedSource& source, const std::vector<std::string>& options) {
  return json{{"build", build_stamp()}, {"name", source.name}, {"entry", source.entry}, {"text", source.text},
              {"options", options}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<WorkerRequest> decode_request(std::string_view text) {
  auto bad = [](const std::string& why) { return Error(ErrorCode::invalid_argument, "bad worker request: " + why); };
  FLASHJIT_TRY(check_json_depth(text));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  WorkerRequest r;
  for (auto [field, dst] : {std::pair{"build", &r.build}, {"name", &r.source.name}, {"entry", &r.source.entry},
                            {"text", &r.source.text}}) {
    auto it = j.find(field);
    if (it == j.end() || !it->is_string()) return bad(fmt::format("'{}' is not a string", field));
    *dst = it->get<std::string>();
  }
  auto options = j.find("options");
  if (options == j.end() || !options->is_array()) return bad("'options' is not a list");
  for (const auto& o : *options) {
    if (!o.is_string()) return bad("an option is not a string");
    r.options.push_back(o.get<std::string>());
  }
  return r;
}

std::string encode_reply(const Result<CompiledKernel>& result, const LogLines& messages) {
  json lines = json::array();
  for (const auto& [level, text] : messages) lines.push_back({static_cast<int>(level), text});
  if (!result.ok())
    return json{{"ok", false}, {"error", error_to_json(result.error())}, {"messages", lines}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
  const CompiledKernel& k = *result;
  return json{{"ok", true},
              {"messages", lines},
              {"cubin", base64(k.cubin)},
              {"log", k.log},
              {"compile_ms", k.compile_ms},
              {"ptxas", ptxas_to_json(k.ptxas)}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<Result<CompiledKernel>> decode_reply(std::string_view line, LogLines* messages) {
  if (!check_json_depth(line)) return std::nullopt;
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) return std::nullopt;
  if (messages && j.contains("messages") && j["messages"].is_array())
    for (const auto& m : j["messages"])
      if (m.is_array() && m.size() == 2 && m[0].is_number_integer() && m[1].is_string() && m[0].get<int>() >= 0 &&
          m[0].get<int>() <= static_cast<int>(log::Level::debug))
        messages->emplace_back(static_cast<log::Level>(m[0].get<int>()), m[1].get<std::string>());
  try {
    if (!j["ok"].get<bool>()) {
      if (!j.contains("error") || !j["error"].is_object()) return std::nullopt;
      return Result<CompiledKernel>(error_from_json(j["error"]));
    }
    CompiledKernel k;
    auto cubin = unbase64(j.at("cubin").get<std::string>());
    if (!cubin) return std::nullopt;
    k.cubin = std::move(*cubin);
    k.log = j.at("log").get<std::string>();
    k.compile_ms = j.at("compile_ms").get<double>();
    k.ptxas = ptxas_from_json(j.at("ptxas"));
    return Result<CompiledKernel>(std::move(k));
  } catch (const json::exception&) {  // a field missing or of the wrong type
    return std::nullopt;
  }
}

Result<CompiledKernel> build_mismatch(const std::string& requested) {
  return Error(ErrorCode::unsupported,
               fmt::format("{}it is another build ({}), asked by {}", kUnusable, build_stamp(), requested));
}

bool worker_unusable(const Error& e) { return e.message.starts_with(kUnusable); }

Result<CompiledKernel> compile_in_worker(const WorkerOptions& worker, const codegen::GeneratedSource& source,
                                         const std::vector<std::string>& options, const log::Logger& logger) {
  if (worker.command.empty()) return Error(ErrorCode::unsupported, fmt::format("{}none configured", kUnusable));
  std::vector<std::string> argv = worker.command;
  argv.insert(argv.end(), {kNvrtcWorkerCommand, "--parent", std::to_string(::getpid())});
  const std::string request = encode_request(source, options);
  const auto start = std::chrono::steady_clock::now();
  auto child = Child::spawn(argv, {}, &request);
  if (!child.ok())
    return Error(ErrorCode::unsupported, fmt::format("{}{}", kUnusable, child.error().message));
  Child& c = **child;
  const bool late = wait_for_end(c, deadline_of(start, worker.timeout));
  const std::string& err = c.output(Child::err);
  if (late)
    return Error(ErrorCode::compile,
                 fmt::format("the compile worker ran past the {:g} s time limit compiling {} and was killed",
                             worker.timeout.count() / 1000.0, source.name),
                 tail(err));
  LogLines messages;
  if (auto reply = reply_of(c.output(Child::out), messages)) {
    for (const auto& [level, text] : messages)
      if (level <= logger.level()) logger.write(level, text);
    return std::move(*reply);
  }
  // A worker that cannot run at all (exec of a non-executable file, a missing library) is not a compiler fault.
  if (WIFEXITED(c.wait_status()) && WEXITSTATUS(c.wait_status()) == 127)
    return Error(ErrorCode::unsupported, fmt::format("{}{} exited with status 127", kUnusable, argv[0]), tail(err));
  return Error(ErrorCode::compile,
               fmt::format("the compile worker {} compiling {} without a result", describe_wait_status(c.wait_status()),
                           source.name),
               tail(err));
}

}  // namespace flashjit::compile
