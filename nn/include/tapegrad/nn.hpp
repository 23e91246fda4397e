// tg::nn — modules, functional forms and losses.
#pragma once
