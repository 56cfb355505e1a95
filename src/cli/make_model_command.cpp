#include "cli/make_model_command.h"

#include <filesystem>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "base/error.h"
#include "cli/options.h"
#include "model/synthetic.h"

namespace bitsim::cli {

namespace {

class MakeModel final : public Command {
 public:
  explicit MakeModel(CLI::App& app)
      : Command(app.add_subcommand("make-model", "Write a synthetic checkpoint in the real file layout")) {
    sub_->add_option("--shape", shape_,
                     "Model shape: bitnet-large, tiny, tiny-gqa, bitnet-large-gqa4, bitnet-2b4t (BitNet b1.58 2B4T: "
                     "about 10 GB of F32), tiny-2b4t or tiny-ffn6912 (tiny-2b4t with 2B4T's FFN of 6912)")
        ->check(CLI::IsMember(model::shape_names()))
        ->capture_default_str();
    sub_->add_option("--format", format_,
                     "How the projections are stored: latent (F32 latent weights) or packed (BitNet b1.58 2B4T's "
                     "packed ternary release: U8, 4 trits to a byte, with a BF16 weight_scale; docs/packed-image.md)")
        ->check(CLI::IsMember({"latent", "packed"}))
        ->capture_default_str();
    sub_->add_option("--seed", seed_, "Seed of the weight generator")
        ->transform(unsigned_in(0, std::numeric_limits<uint64_t>::max()))
        ->capture_default_str();
    sub_->add_option("--out", out_, "Output folder (created if missing; an existing one only with --force)")
        ->required()
        ->check(file_name());
    sub_->add_flag("--force", force_, "Overwrite the checkpoint files of an existing --out folder");
  }

  int run() override {
    const auto shape = model::parse_shape(shape_);
    const auto format = model::parse_checkpoint_format(format_);
    check_out_folder();
    model::write_synthetic_checkpoint(shape, seed_, out_, format);
    fmt::print("wrote synthetic {} checkpoint (seed {}) to {}\n", shape_, seed_, out_);
    if (format == model::CheckpointFormat::Packed)
      fmt::print("  config.json, model.safetensors (MODEL.md tensor names; the projections packed ternary, U8 with a "
                 "BF16 weight_scale; the embedding and norms F32), TOKENIZER.md\n");
    else
      fmt::print("  config.json, model.safetensors (F32 latent weights, MODEL.md tensor names), TOKENIZER.md\n");
    fmt::print("  the weights are random: text generated with them is noise\n");
    return 0;
  }

 private:
  // An existing folder is a checkpoint someone may need: written over only with --force.
  void check_out_folder() const {
    std::error_code ec;
    const auto st = std::filesystem::status(out_, ec);
    if (std::filesystem::exists(st)) {
      if (!std::filesystem::is_directory(st)) throw Error(fmt::format("--out {}: exists and is not a folder", out_));
      if (!force_ && !std::filesystem::is_empty(out_, ec))
        throw Error(fmt::format("--out {}: the folder exists and is not empty; give --force to write the checkpoint "
                                "files (config.json, model.safetensors, TOKENIZER.md) over what is there", out_));
    } else if (ec && ec != std::errc::no_such_file_or_directory) {
      throw Error(fmt::format("--out {}: {}", out_, ec.message()));
    }
  }

  std::string shape_ = "tiny";
  std::string format_ = "latent";
  uint64_t seed_ = 1;
  std::string out_;
  bool force_ = false;
};

}  // namespace

std::unique_ptr<Command> add_make_model_command(CLI::App& app) { return std::make_unique<MakeModel>(app); }

}  // namespace bitsim::cli
