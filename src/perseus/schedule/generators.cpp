#include "perseus/schedule/generators.hpp"
