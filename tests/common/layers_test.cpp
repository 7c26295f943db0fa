// The layer rule of src/LAYERS: a file under src/ or include/flashjit/ includes ("...") headers of its own layer
// and of lower layers only, and no file under src/ has more than 450 lines. A planted tree checks that the
// check names what breaks the rule.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/catch.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int kMaxSourceLines = 450;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// src/LAYERS: a line of one word is a layer (lowest first), a line of two maps a path (a folder when it ends
// with /) to a layer; '#' starts a comment.
struct Layers {
  std::vector<std::string> order;
  std::vector<std::pair<std::string, std::string>> paths;
  std::vector<std::string> problems;  // in the list itself

  static Layers parse(const std::string& text) {
    Layers out;
    std::istringstream lines(text);
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n) {
      std::istringstream words(line.substr(0, line.find('#')));
      std::vector<std::string> w;
      for (std::string word; words >> word;) w.push_back(word);
      const std::string where = "src/LAYERS:" + std::to_string(n) + ": ";
      if (w.size() == 1) {
        if (out.rank(w[0]) >= 0) out.problems.push_back(where + "layer " + w[0] + " is listed twice");
        out.order.push_back(w[0]);
      } else if (w.size() == 2) {
        if (out.rank(w[1]) < 0) out.problems.push_back(where + w[0] + " is mapped to " + w[1] + ", not a layer listed above");
        out.paths.emplace_back(w[0], w[1]);
      } else if (!w.empty()) {
        out.problems.push_back(where + "expected a layer, or a path and its layer");
      }
    }
    return out;
  }

  int rank(const std::string& layer) const {
    auto it = std::find(order.begin(), order.end(), layer);
    return it == order.end() ? -1 : static_cast<int>(it - order.begin());
  }

  // The layer of a file named from the top of the tree: its folder under src/, else the longest mapped path.
  std::optional<std::string> layer_of(const std::string& file) const {
    if (file.rfind("src/", 0) == 0) {
      const auto slash = file.find('/', 4);
      if (slash == std::string::npos) return std::nullopt;
      std::string folder = file.substr(4, slash - 4);
      if (rank(folder) < 0) return std::nullopt;
      return folder;
    }
    std::optional<std::string> best;
    std::size_t best_length = 0;
    for (const auto& [path, layer] : paths) {
      const bool folder = path.back() == '/';
      if ((folder ? file.rfind(path, 0) == 0 : file == path) && path.size() > best_length)
        best = layer, best_length = path.size();
    }
    return best;
  }
};

std::string from_root(const fs::path& path, const fs::path& root) {
  return path.lexically_normal().lexically_relative(root).generic_string();
}

// Where `#include "name"` in `file` leads, from the top of the tree: the file's own folder first, then the
// include folders of the build (include/, src/, templates/). nullopt when none has it.
std::optional<std::string> resolve(const fs::path& root, const fs::path& file, const std::string& name) {
  for (const fs::path& dir : {file.parent_path(), root / "include", root / "src", root / "templates"}) {
    std::error_code ec;
    if (fs::is_regular_file(dir / name, ec)) return from_root(dir / name, root);
  }
  return std::nullopt;
}

// Every file under src/ and include/flashjit/ of the tree at `root`, checked against root/src/LAYERS: one line
// per problem ("FILE:LINE: ...").
std::vector<std::string> check_tree(const fs::path& root) {
  const Layers layers = Layers::parse(read_text(root / "src" / "LAYERS"));
  std::vector<std::string> problems = layers.problems;
  if (layers.order.empty()) problems.push_back("src/LAYERS lists no layer");
  std::vector<fs::path> files;
  for (const char* top : {"src", "include/flashjit"}) {
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(root / top, ec))
      if (e.is_regular_file() && !(top == std::string("src") && e.path().filename() == "LAYERS"))
        files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  const std::regex include_line(R"(^\s*#\s*include\s*"([^"]+)\")");
  for (const auto& path : files) {
    const std::string file = from_root(path, root);
    const auto layer = layers.layer_of(file);
    if (!layer) {
      problems.push_back(file + ": belongs to no layer of src/LAYERS (a src/ folder is a layer; other files are mapped "
                                "there)");
      continue;
    }
    std::istringstream lines(read_text(path));
    std::string line;
    int n = 0;
    for (std::smatch m; std::getline(lines, line);) {
      ++n;
      if (!std::regex_search(line, m, include_line)) continue;
      const std::string where = file + ":" + std::to_string(n) + ": ";
      const std::string name = m[1].str();
      const auto target = resolve(root, path, name);
      if (!target) {
        problems.push_back(where + "\"" + name + "\" is in none of the file's folder, include/, src/, templates/");
        continue;
      }
      const auto target_layer = layers.layer_of(*target);
      if (!target_layer) {
        problems.push_back(where + "\"" + name + "\" (" + *target + ") belongs to no layer of src/LAYERS");
      } else if (layers.rank(*target_layer) > layers.rank(*layer)) {
        problems.push_back(where + "layer " + *layer + " includes \"" + name + "\" of layer " + *target_layer +
                           ", a higher one");
      }
    }
    if (file.rfind("src/", 0) == 0 && n > kMaxSourceLines)
      problems.push_back(file + ": " + std::to_string(n) + " lines, more than " + std::to_string(kMaxSourceLines) +
                         " (split it by role)");
  }
  return problems;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

bool has(const std::vector<std::string>& problems, const std::string& line) {
  return std::find(problems.begin(), problems.end(), line) != problems.end();
}

}  // namespace

TEST_CASE("layers: files include their own layer's and lower layers' headers; src/ files stay short", "[layers]") {
  const auto problems = check_tree(FLASHJIT_SOURCE_DIR);
  for (const auto& p : problems) FAIL_CHECK(p);
  CHECK(problems.empty());
}

TEST_CASE("layers: the check names each file that breaks the rule", "[layers]") {
  flashjit::test::TempDir dir("flashjit-layers");
  write(dir / "src/LAYERS", "low   # the bottom\nhigh\nlow\ninclude/flashjit/low.hpp  low\ntemplates/  high\n"
                            "include/flashjit/bad.hpp  nowhere\n");
  write(dir / "src/low/a.hpp", "#pragma once\n#include <vector>\n#include \"low/b.hpp\"\n  #  include \"high/c.hpp\"\n");
  write(dir / "src/low/b.hpp", "#include \"b_part.inc\"\n#include \"flashjit/low.hpp\"\n// #include \"high/c.hpp\"\n");
  write(dir / "src/low/b_part.inc", "#include \"kernel/params.cuh\"\n#include \"missing.hpp\"\n");
  write(dir / "src/high/c.hpp", "#include \"low/a.hpp\"\n#include \"flashjit/low.hpp\"\n#include \"flashjit/unmapped.hpp\"\n");
  write(dir / "src/high/long.cpp", std::string(kMaxSourceLines + 1, '\n'));
  write(dir / "src/high/ok.cpp", std::string(kMaxSourceLines, '\n'));
  write(dir / "src/other/d.cpp", "\n");
  write(dir / "include/flashjit/low.hpp", "#include \"high/c.hpp\"\n");
  write(dir / "include/flashjit/unmapped.hpp", "\n");
  write(dir / "templates/kernel/params.cuh", "\n");

  const auto problems = check_tree(dir.path);
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  INFO(all);
  CHECK(has(problems, "src/LAYERS:3: layer low is listed twice"));
  CHECK(has(problems, "src/LAYERS:6: include/flashjit/bad.hpp is mapped to nowhere, not a layer listed above"));
  CHECK(has(problems, "src/low/a.hpp:4: layer low includes \"high/c.hpp\" of layer high, a higher one"));
  CHECK(has(problems, "src/low/b_part.inc:1: layer low includes \"kernel/params.cuh\" of layer high, a higher one"));
  CHECK(has(problems, "src/low/b_part.inc:2: \"missing.hpp\" is in none of the file's folder, include/, src/, "
                      "templates/"));
  CHECK(has(problems, "src/high/c.hpp:3: \"flashjit/unmapped.hpp\" (include/flashjit/unmapped.hpp) belongs to no "
                      "layer of src/LAYERS"));
  CHECK(has(problems, "src/high/long.cpp: 451 lines, more than 450 (split it by role)"));
  CHECK(has(problems, "src/other/d.cpp: belongs to no layer of src/LAYERS (a src/ folder is a layer; other files are "
                      "mapped there)"));
  CHECK(has(problems, "include/flashjit/low.hpp:1: layer low includes \"high/c.hpp\" of layer high, a higher one"));
  CHECK(has(problems, "include/flashjit/unmapped.hpp: belongs to no layer of src/LAYERS (a src/ folder is a layer; "
                      "other files are mapped there)"));
  CHECK(problems.size() == 10);  // nothing about a.hpp:3, b.hpp, the comment, c.hpp:1-2, ok.cpp
}
