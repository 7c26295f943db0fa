#include "compile/nvrtc.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <regex>

#include "codegen/embedded_templates.hpp"
#include "common/log.hpp"
#include "compile/nvrtc_library.hpp"

namespace flashjit::compile {
namespace {

Error nvrtc_error(const NvrtcApi& api, nvrtcResult r, const char* call, std::string log = {}) {
  return Error(ErrorCode::compile, fmt::format("{} failed: {}", call, api.nvrtcGetErrorString(r)), std::move(log));
}

// Owns an nvrtcProgram.
struct Program {
  const NvrtcApi& api;
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle) api.nvrtcDestroyProgram(&handle);
  }
};

std::string program_log(const NvrtcApi& api, nvrtcProgram prog) {
  size_t size = 0;
  if (api.nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (api.nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(size - 1);
  return log;
}

// NVRTC 12.9+ keeps cubins in the driver's compute cache and serves a repeat compile from it without running
// ptxas, i.e. without the -v report (registers, spills, the setmaxnreg warning) that the autotuner's spill
// filter and every compile report rely on. flashjit's disk cache keeps the cubin and its report together;
// NVRTC's would only hide the report (and fill the user's ~/.nv/ComputeCache). Older NVRTC has no cache and
// refuses the option.
bool nvrtc_has_cache() {
  auto api = nvrtc();
  return api.ok() && ((*api)->major > 12 || ((*api)->major == 12 && (*api)->minor >= 9));
}

}  // namespace

std::vector<std::string> options_for(const Arch& arch) {
  std::vector<std::string> options = {
      fmt::format("-arch={}", arch.to_string()),
      "-std=c++17",
      "-default-device",
      "-Xptxas=-v",
      "-Xptxas=-warn-spills",
      "-lineinfo",
  };
  static const bool no_cache = nvrtc_has_cache();
  if (no_cache) options.push_back("--no-cache");
  return options;
}

const std::string& nvrtc_version() {
  static const std::string v = [] {
    auto api = nvrtc();
    return api.ok() ? fmt::format("{}.{}", (*api)->major, (*api)->minor) : std::string("unknown");
  }();
  return v;
}

namespace {

// Creates the program over the embedded templates and compiles it; the log is kept whatever the outcome.
Status compile_program(Program& prog, std::string& log, double& ms, const codegen::GeneratedSource& source,
                       const std::vector<std::string>& options, const log::Logger& logger) {
  const auto& headers = codegen::embedded_templates();
  std::vector<const char*> header_texts, header_names;
  for (const auto& h : headers) {
    header_texts.push_back(h.text);
    header_names.push_back(h.name);
  }
  std::string file_name = source.name + ".cu";
  const NvrtcApi& api = prog.api;
  nvrtcResult r = api.nvrtcCreateProgram(&prog.handle, source.text.c_str(), file_name.c_str(),
                                     static_cast<int>(headers.size()), header_texts.data(), header_names.data());
  if (r != NVRTC_SUCCESS) return nvrtc_error(api, r, "nvrtcCreateProgram");

  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  logger.debug("nvrtc compile {} with: {}", source.name, fmt::join(options, " "));

  auto t0 = std::chrono::steady_clock::now();
  r = api.nvrtcCompileProgram(prog.handle, static_cast<int>(opts.size()), opts.data());
  auto t1 = std::chrono::steady_clock::now();
  ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  log = program_log(api, prog.handle);
  if (r != NVRTC_SUCCESS)
    return nvrtc_error(api, r, "nvrtcCompileProgram", log).with(fmt::format("while compiling {}", source.name));
  return {};
}

}  // namespace

Result<CompiledKernel> compile(const codegen::GeneratedSource& source, const std::vector<std::string>& options,
                               const log::Logger& logger) {
  auto loaded = nvrtc();
  if (!loaded.ok()) return Error(loaded.error()).with(fmt::format("while compiling {}", source.name));
  const NvrtcApi& api = **loaded;
  Program prog{api};
  CompiledKernel out;
  FLASHJIT_TRY(compile_program(prog, out.log, out.compile_ms, source, options, logger));
  size_t size = 0;
  nvrtcResult r = api.nvrtcGetCUBINSize(prog.handle, &size);
  if (r != NVRTC_SUCCESS) return nvrtc_error(api, r, "nvrtcGetCUBINSize");
  out.cubin.resize(size);
  r = api.nvrtcGetCUBIN(prog.handle, out.cubin.data());
  if (r != NVRTC_SUCCESS) return nvrtc_error(api, r, "nvrtcGetCUBIN");
  out.ptxas = parse_ptxas(out.log, source.entry);
  if (out.ptxas.registers < 0) {
    // A log format this parser does not know would say so for every kernel: once as a warning.
    static std::atomic<bool> warned{false};
    const std::string what =
        fmt::format("no ptxas report in the NVRTC log of {}: registers and spills unknown", source.name);
    if (!warned.exchange(true)) logger.warn("{}", what);
    else logger.debug("{}", what);
  }
  logger.debug("compiled {} in {:.0f} ms: {} registers, {} bytes spilled", source.name, out.compile_ms,
             out.ptxas.registers, out.ptxas.spill_stores + out.ptxas.spill_loads);
  return out;
}

Result<std::string> compile_ptx(const codegen::GeneratedSource& source, const Arch& arch, const log::Logger& logger) {
  // The virtual arch of the same generation ("compute_90a"), the other options as for the cubin but ptxas's.
  std::vector<std::string> options;
  for (const auto& o : options_for(arch)) {
    if (o.rfind("-Xptxas", 0) == 0) continue;
    options.push_back(o.rfind("-arch=", 0) == 0 ? "-arch=compute_" + arch.to_string().substr(3) : o);
  }
  auto loaded = nvrtc();
  if (!loaded.ok()) return Error(loaded.error()).with(fmt::format("while compiling {}", source.name));
  const NvrtcApi& api = **loaded;
  Program prog{api};
  std::string log;
  double ms = 0;
  FLASHJIT_TRY(compile_program(prog, log, ms, source, options, logger));
  size_t size = 0;
  nvrtcResult r = api.nvrtcGetPTXSize(prog.handle, &size);
  if (r != NVRTC_SUCCESS) return nvrtc_error(api, r, "nvrtcGetPTXSize");
  std::string ptx(size, '\0');
  r = api.nvrtcGetPTX(prog.handle, ptx.data());
  if (r != NVRTC_SUCCESS) return nvrtc_error(api, r, "nvrtcGetPTX");
  if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

PtxasStats parse_ptxas(std::string_view log, std::string_view entry) {
  PtxasStats s;
  std::string text(log);
  // The report of one entry runs from "Compiling entry function 'NAME'" to the next such line; the quotes
  // keep NAME from matching a longer name that starts with it.
  const std::string marker = "Compiling entry function '";
  std::size_t start = text.find(marker + std::string(entry) + "'");
  std::string part = text;
  if (start != std::string::npos) {
    std::size_t end = text.find(marker, start + marker.size());
    part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  }
  std::smatch m;
  if (std::regex_search(part, m, std::regex(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
    s.stack_frame = std::stoi(m[1]);
    s.spill_stores = std::stoi(m[2]);
    s.spill_loads = std::stoi(m[3]);
  }
  if (std::regex_search(part, m, std::regex(R"(Used (\d+) registers)"))) s.registers = std::stoi(m[1]);
  if (std::regex_search(part, m, std::regex(R"((\d+) bytes smem)"))) s.static_smem = std::stoi(m[1]);
  // The setmaxnreg warning does not name its function: with one entry in the program (the generated
  // sources have one) any C7508 is that entry's; otherwise only one inside the entry's own report counts.
  const bool single_entry = text.find(marker) == text.rfind(marker);
  s.setmaxnreg_ignored = (single_entry ? text : part).find("C7508") != std::string::npos;
  return s;
}

}  // namespace flashjit::compile
