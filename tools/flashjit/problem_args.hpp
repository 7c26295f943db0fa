// The attention problem options `run` and `select` share (--batch, --seqlen-q, ..., --mask, the window and
// chunk constants), and their check with errors that name the options the user gave.
#pragma once

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "flashjit/problem.hpp"

namespace flashjit::cli {

struct ProblemArgs {
  AttentionProblem problem;  // the shape; no tensors
  std::string dtype = "bf16";
  std::string mask = "none";
  CLI::Option* dtype_opt = nullptr;
  CLI::Option* mask_opt = nullptr;
  CLI::Option* head_dim_opt = nullptr;
};

// Adds the options, with `problem`'s current values as their defaults.
void add_problem_options(CLI::App& app, ProblemArgs& args);
// The problem with dtype and mask parsed.
AttentionProblem problem_of(const ProblemArgs& args);
// Checks the shape (dispatch::check_shape): each issue printed as "--head-dim 512: must be ...";
// kUsage when there is one, else kOk.
int check_problem(const AttentionProblem& problem);
// One JSON object of the shape (dispatch::ProblemShape's form).
nlohmann::ordered_json problem_json(const AttentionProblem& problem);

}  // namespace flashjit::cli
