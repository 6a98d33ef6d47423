// The rules that tie config keys together (docs/CONFIG.md, "Rules"), checked once the file has
// been read into a Config.
#ifndef SUPERKERNEL_CONFIG_RULES_H_
#define SUPERKERNEL_CONFIG_RULES_H_

#include "config/config.h"

namespace sk::config {

// The first broken rule, naming the file:line of the key that breaks it.
Status check_rules(const Config& cfg);

}  // namespace sk::config

#endif  // SUPERKERNEL_CONFIG_RULES_H_
