// The rule for the names of a module's members (module.cpp), which ModuleDict's keys follow too.
// Private to nn/.
#pragma once

#include <string>

namespace tg::nn::detail {

// tg::Error naming `what` unless `name` is non-empty, has no '.' and is not "__metadata__".
void check_member_name(const std::string& name, const char* what);

}  // namespace tg::nn::detail
