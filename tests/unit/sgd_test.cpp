// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The SGD rule (training/sgd.hpp) against torch.optim.SGD's, worked out by hand: weight decay
// added to the gradient, the momentum buffer created on the first step, Nesterov's look-ahead.
#include "catch.hpp"

#include <gpucmp/training/sgd.hpp>

#include <string>

TEST_CASE("the SGD reference moves a weight as torch.optim.SGD does", "[training][sgd]") {
  gpucmp::sgd_options o;
  o.learning_rate = 0.1f;
  o.momentum = 0.9f;
  o.weight_decay = 0.1f;
  float p = 1.0f, buf = -7.0f;  // the buffer's old contents never matter on the first step
  // Step 1: d = 0.5 + 0.1 * 1 = 0.6; buf = d; p = 1 - 0.1 * 0.6.
  gpucmp::sgd_update_reference(p, 0.5f, buf, true, o);
  CHECK(buf == Approx(0.6).epsilon(1e-6));
  CHECK(p == Approx(0.94).epsilon(1e-6));
  // Step 2: d = 0.5 + 0.094 = 0.594; buf = 0.9 * 0.6 + 0.594 = 1.134; p = 0.94 - 0.1134.
  gpucmp::sgd_update_reference(p, 0.5f, buf, false, o);
  CHECK(buf == Approx(1.134).epsilon(1e-6));
  CHECK(p == Approx(0.8266).epsilon(1e-6));

  // Nesterov: the step is d + momentum * buf: 0.6 + 0.54 = 1.14.
  o.nesterov = true;
  float q = 1.0f, nbuf = 0.0f;
  gpucmp::sgd_update_reference(q, 0.5f, nbuf, true, o);
  CHECK(nbuf == Approx(0.6).epsilon(1e-6));
  CHECK(q == Approx(1.0 - 0.114).epsilon(1e-6));

  // No momentum: plain SGD with weight decay, the buffer untouched.
  gpucmp::sgd_options plain;
  plain.momentum = 0;
  plain.weight_decay = 0.5f;
  plain.learning_rate = 0.2f;
  float r = 2.0f, untouched = 3.0f;
  gpucmp::sgd_update_reference(r, 1.0f, untouched, true, plain);
  CHECK(r == Approx(2.0 - 0.2 * (1.0 + 1.0)).epsilon(1e-6));
  CHECK(untouched == 3.0f);
}

TEST_CASE("SGD options name the field that is wrong", "[training][sgd]") {
  auto message = [](gpucmp::sgd_options o) {
    try {
      o.validate();
    } catch (const gpucmp::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  gpucmp::sgd_options o;
  CHECK(message(o).empty());
  o.learning_rate = 0;
  CHECK_THAT(message(o), GPUCMP_CONTAINS("learning_rate"));
  o = {};
  o.momentum = 1;
  CHECK_THAT(message(o), GPUCMP_CONTAINS("momentum"));
  o = {};
  o.weight_decay = -1;
  CHECK_THAT(message(o), GPUCMP_CONTAINS("weight_decay"));
  o = {};
  o.momentum = 0;
  o.nesterov = true;
  CHECK_THAT(message(o), GPUCMP_CONTAINS("nesterov"));
}
