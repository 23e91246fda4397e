// tg::optim — optimizers and learning-rate schedules.
#pragma once
