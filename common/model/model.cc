#include "common/model/model.h"

#include <utility>

#include "common/base/status_macros.h"
#include "glog/logging.h"

namespace pdserve {

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  std::unique_ptr<Model> m(new Model);
  ASSIGN_OR_RETURN(m->card_, ModelCard::Load(path));
  ASSIGN_OR_RETURN(m->weights_, ModelWeights::Load(m->card_->gguf(), m->card_->config()));
  const ModelConfig& c = m->config();
  LOG(INFO) << "loaded model '" << c.name << "' from " << path << ": " << c.n_layers
            << " layers, d=" << c.n_embd << ", vocab=" << c.n_vocab << ", fingerprint "
            << m->fingerprint();
  return m;
}

}  // namespace pdserve
