/* proto_all.h - every message format of neurostream (ring records and ZeroMQ messages). */
#ifndef NS_PROTO_ALL_H
#define NS_PROTO_ALL_H

#include "ctl_msg.h"
#include "ring_rec.h"
#include "zmsg.h"

#endif
