// Site-wide behaviour. No inline scripts anywhere: the Content-Security-Policy forbids them.
"use strict";
